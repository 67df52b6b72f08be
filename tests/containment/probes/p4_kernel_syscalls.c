// P4: kernel-extending calls: init_module, finit_module, kexec_load, bpf (map create), and
// perf_event_open. Contained: each fails with EPERM / ENOSYS (never reaches the host kernel).
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  Probe p;
  probe_begin(&p, "P4", "init_module, kexec_load, bpf, perf_event_open");
  char errs[256] = "";
  struct {
    const char* name;
    long rc;
    int err;
  } calls[5];
  int n = 0;
#define TRY(label, expr)                \
  do {                                  \
    errno = 0;                          \
    long rc_ = (long)(expr);            \
    calls[n].name = label;              \
    calls[n].rc = rc_;                  \
    calls[n].err = rc_ < 0 ? errno : 0; \
    ++n;                                \
  } while (0)
  static char image[64];
  TRY("init_module", syscall(SYS_init_module, image, sizeof image, ""));
  TRY("finit_module", syscall(SYS_finit_module, -1, "", 0));
  TRY("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.map_type = BPF_MAP_TYPE_ARRAY;
  attr.key_size = 4;
  attr.value_size = 4;
  attr.max_entries = 1;
  TRY("bpf_map_create", syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr));
  struct perf_event_attr pe;
  memset(&pe, 0, sizeof pe);
  pe.type = PERF_TYPE_SOFTWARE;
  pe.size = sizeof pe;
  pe.config = PERF_COUNT_SW_CPU_CLOCK;
  pe.disabled = 1;
  TRY("perf_event_open", syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0));
  for (int i = 0; i < n; ++i) {
    probe_err(&p, calls[i].name, calls[i].err);
    probe_errset_add(errs, sizeof errs, calls[i].err);
    // EPERM/ENOSYS/EACCES: refused. Anything else (EFAULT, EINVAL, EBADF, success) means the
    // call got as far as argument checking in a kernel that implements it.
    int refused = calls[i].err == EPERM || calls[i].err == ENOSYS || calls[i].err == EACCES;
    if (!refused) probe_escaped(&p);
    if (calls[i].rc >= 0) close((int)calls[i].rc);
  }
  return probe_finish(&p, errs);
}
