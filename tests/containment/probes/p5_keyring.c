// P5: the kernel keyring: add_key, keyctl, request_key. Contained: EPERM / ENOSYS.
#include <sys/syscall.h>

#include "probe.h"

#define KEY_SPEC_PROCESS_KEYRING -2
#define KEYCTL_GET_KEYRING_ID 0

int main(void) {
  Probe p;
  probe_begin(&p, "P5", "add_key, keyctl, request_key");
  char errs[128] = "";
  long rc = syscall(SYS_add_key, "user", "safex-p5", "secret", 6, KEY_SPEC_PROCESS_KEYRING);
  int e1 = rc < 0 ? errno : 0;
  long rc2 = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 0);
  int e2 = rc2 < 0 ? errno : 0;
  long rc3 = syscall(SYS_request_key, "user", "safex-p5", NULL, 0);
  int e3 = rc3 < 0 ? errno : 0;
  probe_err(&p, "add_key", e1);
  probe_err(&p, "keyctl", e2);
  probe_err(&p, "request_key", e3);
  int errs_v[3] = {e1, e2, e3};
  for (int i = 0; i < 3; ++i) {
    probe_errset_add(errs, sizeof errs, errs_v[i]);
    if (errs_v[i] != EPERM && errs_v[i] != ENOSYS && errs_v[i] != EACCES) probe_escaped(&p);
  }
  return probe_finish(&p, errs);
}
