// Network helpers for the N* probes: endpoints written as
//   tcp:ADDR:PORT   udp:ADDR:PORT   (IPv4 or [IPv6] literal; never a name: nothing is resolved)
//   unix:/path      abstract:NAME   (a unix stream socket by path, or in the abstract namespace)
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

typedef struct {
  int type;  // SOCK_STREAM / SOCK_DGRAM
  struct sockaddr_storage addr;
  socklen_t len;
} Endpoint;

static inline int probe_parse_endpoint(const char* spec, Endpoint* ep) {
  memset(ep, 0, sizeof *ep);
  if (strncmp(spec, "unix:", 5) == 0 || strncmp(spec, "abstract:", 9) == 0) {
    struct sockaddr_un* un = (struct sockaddr_un*)&ep->addr;
    un->sun_family = AF_UNIX;
    ep->type = SOCK_STREAM;
    int abstract = spec[0] == 'a';
    const char* path = spec + (abstract ? 9 : 5);
    size_t n = strlen(path);
    if (n + 2 > sizeof un->sun_path) return -1;
    memcpy(un->sun_path + (abstract ? 1 : 0), path, n);
    ep->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 0));
    return 0;
  }
  if (strncmp(spec, "tcp:", 4) == 0) {
    ep->type = SOCK_STREAM;
  } else if (strncmp(spec, "udp:", 4) == 0) {
    ep->type = SOCK_DGRAM;
  } else {
    return -1;
  }
  const char* hostport = spec + 4;
  const char* colon = strrchr(hostport, ':');
  if (colon == NULL) return -1;
  char host[128];
  size_t hl = (size_t)(colon - hostport);
  if (hl >= sizeof host) return -1;
  memcpy(host, hostport, hl);
  host[hl] = 0;
  int port = atoi(colon + 1);
  if (host[0] == '[') {
    struct sockaddr_in6* in6 = (struct sockaddr_in6*)&ep->addr;
    host[hl - 1] = 0;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1) return -1;
    ep->len = sizeof *in6;
  } else {
    struct sockaddr_in* in = (struct sockaddr_in*)&ep->addr;
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &in->sin_addr) != 1) return -1;
    ep->len = sizeof *in;
  }
  return 0;
}

// Connects (TCP, unix; nothing is written) or sends `payload` and waits for any reply (UDP).
// Returns 0 when the other side was reached (connected / answered), an errno otherwise (ETIMEDOUT:
// no answer). *sent is set when a UDP datagram was accepted by the local stack.
static inline int probe_reach(const char* spec, const char* payload, size_t payload_len,
                              int timeout_ms, int* sent) {
  Endpoint ep;
  if (sent != NULL) *sent = 0;
  if (probe_parse_endpoint(spec, &ep) != 0) return EINVAL;
  int fd = socket(ep.addr.ss_family, ep.type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return errno;
  int err = 0;
  if (ep.type == SOCK_STREAM) {
    if (connect(fd, (struct sockaddr*)&ep.addr, ep.len) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        struct pollfd pfd = {fd, POLLOUT, 0};
        int n = poll(&pfd, 1, timeout_ms);
        if (n == 0) {
          err = ETIMEDOUT;
        } else {
          socklen_t l = sizeof err;
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
        }
      }
    }
  } else {
    ssize_t w = sendto(fd, payload, payload_len, 0, (struct sockaddr*)&ep.addr, ep.len);
    if (w < 0) {
      err = errno;
    } else {
      if (sent != NULL) *sent = 1;
      struct pollfd pfd = {fd, POLLIN, 0};
      int n = poll(&pfd, 1, timeout_ms);
      char buf[512];
      if (n == 0) {
        err = ETIMEDOUT;
      } else if (recv(fd, buf, sizeof buf, 0) < 0) {
        err = errno;
      }
    }
  }
  close(fd);
  return err;
}
