// safex-probe: the program `safex test --builtin` runs inside the sandbox, one attempt per run,
// each trying to break one claim of the plan (supervisor/builtin_probes.h). Static, so that it
// needs nothing from the sandbox's root file system; bind-mounted read-only at /.safex-probe.
//
// Each mode prints one line and exits 0 when the attempt was stopped from inside (an errno),
// 1 when it succeeded (the claim is broken), 2 on a usage error. Attempts the sandbox stops from
// outside (memory, CPU, output, a killing syscall rule) end with the sandbox's verdict instead.
//
//   connect IPV4 PORT TIMEOUT_MS   a TCP connection
//   alloc BYTES                    touch that much anonymous memory
//   fork N                         N live processes at once
//   write PATH                     create a file
//   read PATH                      open a file for reading
//   syscall NR ERRNO               call NR with zero arguments; expect -1 with ERRNO (0: a kill)
//   spin                           burn CPU until stopped
//   output BYTES                   write that much to stdout
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int Blocked(const char* what, int err) {
  printf("blocked: %s: %s\n", what, strerror(err));
  return 0;
}

static int Connect(const char* ip, const char* port, const char* timeout_ms) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)atoi(port));
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) return 2;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Blocked("socket", errno);
  if (connect(fd, (struct sockaddr*)&a, sizeof a) == 0) {
    printf("reached %s:%s\n", ip, port);
    return 1;
  }
  if (errno != EINPROGRESS) return Blocked("connect", errno);
  struct pollfd p = {fd, POLLOUT, 0};
  int n = poll(&p, 1, atoi(timeout_ms));
  if (n == 0) {
    printf("blocked: connect: no answer within %s ms\n", timeout_ms);
    return 0;
  }
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return Blocked("connect", err);
  printf("reached %s:%s\n", ip, port);
  return 1;
}

static int Alloc(const char* bytes) {
  unsigned long long want = strtoull(bytes, NULL, 10), done = 0;
  const size_t chunk = 1 << 20;
  while (done < want) {
    char* p = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return Blocked("mmap", errno);
    for (size_t i = 0; i < chunk; i += 4096) p[i] = 1;
    done += chunk;
  }
  printf("allocated %llu bytes\n", done);
  return 1;
}

static int Fork(const char* count) {
  int want = atoi(count), made = 0;
  pid_t kids[65536];
  if (want > 65536) want = 65536;
  for (; made < want; ++made) {
    pid_t pid = fork();
    if (pid == 0) {
      pause();
      _exit(0);
    }
    if (pid < 0) break;
    kids[made] = pid;
  }
  int err = errno;
  for (int i = 0; i < made; ++i) kill(kids[i], SIGKILL);
  for (int i = 0; i < made; ++i) waitpid(kids[i], NULL, 0);
  if (made == want) {
    printf("forked %d processes\n", made);
    return 1;
  }
  printf("blocked: fork failed after %d processes: %s\n", made, strerror(err));
  return 0;
}

static int Write(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Blocked("open", errno);
  printf("wrote %s\n", path);
  close(fd);
  unlink(path);
  return 1;
}

static int Read(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Blocked("open", errno);
  printf("read %s\n", path);
  close(fd);
  return 1;
}

static int Syscall(const char* nr, const char* expected) {
  errno = 0;
  long r = syscall(atol(nr), 0, 0, 0, 0, 0, 0);
  int err = errno, want = atoi(expected);
  if (r == -1 && want != 0 && err == want) {
    printf("blocked: syscall %s: %s\n", nr, strerror(err));
    return 0;
  }
  printf("survived: syscall %s returned %ld (errno %d)\n", nr, r, err);
  return 1;
}

static int Output(const char* bytes) {
  unsigned long long want = strtoull(bytes, NULL, 10), done = 0;
  static char buf[65536];
  memset(buf, 'x', sizeof buf);
  while (done < want) {
    size_t n = want - done < sizeof buf ? (size_t)(want - done) : sizeof buf;
    ssize_t w = write(1, buf, n);
    if (w < 0) return Blocked("write", errno);
    done += (unsigned long long)w;
  }
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* m = argv[1];
  setvbuf(stdout, NULL, _IONBF, 0);
  if (strcmp(m, "connect") == 0 && argc == 5) return Connect(argv[2], argv[3], argv[4]);
  if (strcmp(m, "alloc") == 0 && argc == 3) return Alloc(argv[2]);
  if (strcmp(m, "fork") == 0 && argc == 3) return Fork(argv[2]);
  if (strcmp(m, "write") == 0 && argc == 3) return Write(argv[2]);
  if (strcmp(m, "read") == 0 && argc == 3) return Read(argv[2]);
  if (strcmp(m, "syscall") == 0 && argc == 4) return Syscall(argv[2], argv[3]);
  if (strcmp(m, "output") == 0 && argc == 3) return Output(argv[2]);
  if (strcmp(m, "spin") == 0 && argc == 2) {
    for (volatile unsigned long i = 0;; ++i) {
    }
  }
  return 2;
}
