// sandbox_connect: the client the end-to-end tests run INSIDE a gVisor sandbox. For each argument
// "tcp:HOST:PORT", "udp:HOST:PORT" or "resolve:NAME" it prints one line:
//   "<arg> reached" | "<arg> blocked <why>" | "<arg> refused" | "<arg> resolved <addr>" |
//   "<arg> unresolved <why>"
// HOST may be a name (looked up with getaddrinfo: the sandbox's /etc/hosts) or an IPv4 literal.
// tcp: connect, then expect the test server's "ok" banner; udp: send, expect "ok" back.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const int kTimeoutMs = 500;

static int wait_for(int fd, short events) {
  struct pollfd p = {fd, events, 0};
  int r;
  do {
    r = poll(&p, 1, kTimeoutMs);
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

static int lookup(const char* host, struct in_addr* out, const char** why) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0) {
    *why = gai_strerror(rc);
    return 0;
  }
  *out = ((struct sockaddr_in*)res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return 1;
}

static void probe(const char* arg) {
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", arg);
  char* kind = buf;
  char* host = strchr(kind, ':');
  if (!host) {
    printf("%s error\n", arg);
    return;
  }
  *host++ = 0;
  const char* why = "";
  struct in_addr addr;
  if (strcmp(kind, "resolve") == 0) {
    if (lookup(host, &addr, &why)) {
      printf("%s resolved %s\n", arg, inet_ntoa(addr));
    } else {
      printf("%s unresolved %s\n", arg, why);
    }
    return;
  }
  char* port = strrchr(host, ':');
  if (!port) {
    printf("%s error\n", arg);
    return;
  }
  *port++ = 0;
  if (!lookup(host, &addr, &why)) {
    printf("%s unresolved %s\n", arg, why);
    return;
  }
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((unsigned short)atoi(port));
  sa.sin_addr = addr;
  int tcp = strcmp(kind, "tcp") == 0;
  int fd = socket(AF_INET, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    printf("%s blocked socket:%s\n", arg, strerror(errno));
    return;
  }
  if (tcp) {
    if (connect(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0) {
      if (errno != EINPROGRESS) {
        printf("%s %s %s\n", arg, errno == ECONNREFUSED ? "refused" : "blocked", strerror(errno));
        close(fd);
        return;
      }
      if (!wait_for(fd, POLLOUT)) {
        printf("%s blocked timeout\n", arg);
        close(fd);
        return;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        printf("%s %s %s\n", arg, err == ECONNREFUSED ? "refused" : "blocked", strerror(err));
        close(fd);
        return;
      }
    }
  } else if (sendto(fd, "ping", 4, 0, (struct sockaddr*)&sa, sizeof(sa)) < 0) {
    printf("%s blocked %s\n", arg, strerror(errno));
    close(fd);
    return;
  }
  char reply[16] = {0};
  if (!wait_for(fd, POLLIN)) {
    printf("%s blocked timeout-reply\n", arg);
  } else if (recv(fd, reply, sizeof(reply) - 1, 0) >= 2 && strncmp(reply, "ok", 2) == 0) {
    printf("%s reached\n", arg);
  } else {
    printf("%s blocked %s\n", arg, strerror(errno));
  }
  close(fd);
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    probe(argv[i]);
    fflush(stdout);
  }
  return 0;
}
