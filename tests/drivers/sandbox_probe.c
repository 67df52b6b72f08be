// sandbox_probe: a tiny program the driver tests run INSIDE the sandbox to make system calls that
// a shell cannot: raw syscalls by number (x32 and i386 ABIs), descriptor listing, fork counting.
// Prints one line of key=value results; never depends on the environment.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int exists(const char* p) {
  struct stat st;
  return stat(p, &st) == 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  if (strcmp(mode, "fds") == 0) {
    // Every open descriptor, in order.
    for (int fd = 0; fd < 65536; ++fd) {
      if (fcntl(fd, F_GETFD) != -1) printf("%d ", fd);
    }
    printf("\n");
    return 0;
  }
  if (strcmp(mode, "mkdir") == 0 && argc == 3) {
    long r = syscall(SYS_mkdir, argv[2], 0755);
    int err = r < 0 ? errno : 0;  // before exists() can change errno
    printf("ret=%ld errno=%d exists=%d\n", r, err, exists(argv[2]));
    return r < 0 ? 1 : 0;
  }
  if (strcmp(mode, "x32-mkdir") == 0 && argc == 3) {
    // The x32 ABI: the syscall number with bit 30 set.
    long r = syscall(0x40000000L | SYS_mkdir, argv[2], 0755);
    int err = r < 0 ? errno : 0;
    printf("ret=%ld errno=%d exists=%d\n", r, err, exists(argv[2]));
    return 0;
  }
  if (strcmp(mode, "int80-mkdir") == 0 && argc == 3) {
    // The i386 ABI from a 64-bit process: int 0x80 with eax = 39 (mkdir on i386). The path must
    // be addressable with 32 bits, so it is copied below 4 GiB.
    char* low = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT,
                     -1, 0);
    if (low == MAP_FAILED) {
      printf("mmap32 failed errno=%d\n", errno);
      return 3;
    }
    strncpy(low, argv[2], 4095);
    long r;
    __asm__ volatile("int $0x80"
                     : "=a"(r)
                     : "a"(39L), "b"((long)(uintptr_t)low), "c"(0755L)
                     : "memory");
    printf("ret=%ld exists=%d\n", r, exists(argv[2]));
    return 0;
  }
  if (strcmp(mode, "forks") == 0 && argc == 3) {
    // Forks children that wait, until the count or the first failure; reports both.
    int want = atoi(argv[2]), made = 0, err = 0;
    for (int i = 0; i < want; ++i) {
      pid_t p = fork();
      if (p < 0) {
        err = errno;
        break;
      }
      if (p == 0) {
        sleep(3);
        _exit(0);
      }
      ++made;
    }
    printf("forked=%d errno=%d\n", made, err);
    fflush(stdout);
    return err != 0 ? 1 : 0;
  }
  if (strcmp(mode, "nnp") == 0) {
    printf("no_new_privs=%d\n", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
    return 0;
  }
  if (strcmp(mode, "ids") == 0) {
    gid_t groups[64];
    int n = getgroups(64, groups);
    printf("uid=%d gid=%d euid=%d egid=%d ngroups=%d\n", (int)getuid(), (int)getgid(),
           (int)geteuid(), (int)getegid(), n);
    return 0;
  }
  if (strcmp(mode, "openfiles") == 0) {
    int n = 0, err = 0;
    for (;;) {
      int fd = open("/dev/null", O_RDONLY);
      if (fd < 0) {
        err = errno;
        break;
      }
      if (++n > 100000) break;
    }
    printf("opened=%d errno=%d\n", n, err);
    return 0;
  }
  return 2;
}
