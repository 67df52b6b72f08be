// without_namespaces PROGRAM ARGS...: runs PROGRAM on a "host" that cannot make new namespaces: a
// seccomp filter makes clone3 unavailable (ENOSYS, as on a kernel without it: glibc falls back to
// clone for threads and processes) and refuses clone and unshare with any namespace flag (EPERM,
// as a kernel or a container runtime does that forbids them). For the fail-closed test.
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return 3;
  const uint64_t kNamespaces = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET |
                               CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
  int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  for (uint64_t flag = 1; flag != 0 && rc == 0; flag <<= 1) {
    if ((kNamespaces & flag) == 0) continue;
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
    if (rc == 0) {
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                            SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
    }
  }
  if (rc != 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(ctx) != 0) {
    std::perror("without_namespaces: seccomp");
    return 3;
  }
  seccomp_release(ctx);
  execv(argv[1], argv + 1);
  std::perror("without_namespaces: execv");
  return 127;
}
