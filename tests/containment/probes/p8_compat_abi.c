// P8: 32-bit syscalls from a 64-bit process (int 0x80, the i386 ABI) and the x32 ABI (syscall
// numbers with bit 30 set): both bypass a filter written for x86_64 numbers only. Each tries
// mkdir(argv[1] + suffix) in a child so a kill is observed. Contained: the directories do not
// exist afterwards (the call was denied, unimplemented, or the child was killed).
// gVisor's ptrace platform does not refuse `int 0x80`: it runs the x86_64 call of that number
// (i386 mkdir, 39, is x86_64 getpid). So the probe also says whether the gate ran the x86_64
// call (int80_native) and tries it with the number of a call the plan's filter denies (x86_64
// unshare, 272): the gate must not get past the filter (int80_unshare).
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "probe.h"

static int Exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

// Runs fn(path) in a child; returns "OK", an errno name, or "signal N".
static const char* InChild(long (*fn)(const char*), const char* path, char* buf, size_t cap) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe-failed";
  pid_t pid = fork();
  if (pid == 0) {
    long r = fn(path);
    int err = r < 0 ? (int)-r : 0;
    if (write(fds[1], &err, sizeof err) != (ssize_t)sizeof err) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  int err = -1;
  ssize_t n = read(fds[0], &err, sizeof err);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n != (ssize_t)sizeof err) {
    snprintf(buf, cap, "signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  } else {
    snprintf(buf, cap, "%s", probe_errname(err));
  }
  return buf;
}

// `int 0x80` with eax = nr and the arguments in both the i386 (ebx, ecx) and the x86_64 (rdi,
// rsi) registers: whichever ABI the kernel underneath applies, it gets the same call.
static long Int80(long nr, long a1, long a2) {
  long r;
  register long rdi __asm__("rdi") = a1;
  register long rsi __asm__("rsi") = a2;
  __asm__ volatile("int $0x80"
                   : "=a"(r)
                   : "a"(nr), "b"(a1), "c"(a2), "r"(rdi), "r"(rsi)
                   : "memory");
  return r;
}

static long Int80Mkdir(const char* path) {
  char* low =
      mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
  if (low == MAP_FAILED) return -ENOMEM;
  strncpy(low, path, 4095);
  return Int80(39, (long)low, 0755);  // i386 mkdir
}

// 0 when the gate ran x86_64 getpid (39) and returned this process's pid.
static long Int80RunsNative(const char* unused) {
  (void)unused;
  long r = Int80(39, 0, 0);
  return r == (long)getpid() ? 0 : r < 0 ? r : -EINVAL;
}

// x86_64 unshare(CLONE_NEWUSER) through the gate: every example policy's filter denies it.
static long Int80Unshare(const char* unused) {
  (void)unused;
  return Int80(272, 0x10000000L, 0);
}

static long X32Mkdir(const char* path) {
  long r = syscall(0x40000000L | SYS_mkdir, path, 0755);
  return r < 0 ? -errno : r;
}

int main(int argc, char** argv) {
  const char* base = argc > 1 ? argv[1] : "/tmp";
  char i386_path[4096], x32_path[4096];
  snprintf(i386_path, sizeof i386_path, "%s/safex-p8-i386", base);
  snprintf(x32_path, sizeof x32_path, "%s/safex-p8-x32", base);
  Probe p;
  probe_begin(&p, "P8", "int 0x80 and x32 syscalls");
  char b1[64], b2[64];
  const char* r1 = InChild(Int80Mkdir, i386_path, b1, sizeof b1);
  const char* r2 = InChild(X32Mkdir, x32_path, b2, sizeof b2);
  char b3[64], b4[64];
  const char* r3 = InChild(Int80RunsNative, "", b3, sizeof b3);
  const char* r4 = InChild(Int80Unshare, "", b4, sizeof b4);
  int e1 = Exists(i386_path), e2 = Exists(x32_path);
  probe_str(&p, "int80_mkdir", r1);
  probe_str(&p, "x32_mkdir", r2);
  probe_str(&p, "int80_native", r3);
  probe_str(&p, "int80_unshare", r4);
  probe_bool(&p, "int80_created", e1);
  probe_bool(&p, "x32_created", e2);
  if (e1 || e2) probe_escaped(&p);
  char result[300];
  if (strcmp(r3, "OK") == 0) {
    snprintf(result, sizeof result,
             "int 0x80 runs x86_64 calls (39: getpid), under the filter (unshare: %s); x32 "
             "mkdir: %s; nothing created",
             r4, r2);
  } else {
    snprintf(result, sizeof result,
             "int 0x80 mkdir: %s; x32 mkdir: %s; int 0x80 unshare: %s; nothing created", r1, r2,
             r4);
  }
  if (e1 || e2) snprintf(result, sizeof result, "created: int80=%d x32=%d", e1, e2);
  return probe_finish(&p, result);
}
