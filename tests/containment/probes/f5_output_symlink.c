// F5: make the declared output file a symlink to a host file (argv[1]) and hope the supervisor
// follows it when it collects the output. The probe can only plant the link; the runner checks
// that collection refused it and that the host file is untouched.
#include "probe.h"

int main(int argc, char** argv) {
  if (argc < 3) return kProbeError;
  const char* target = argv[1];
  const char* output = argv[2];
  Probe p;
  probe_begin(&p, "F5", "output file is a symlink to a host file");
  int rc = symlink(target, output);
  probe_err(&p, "symlink", rc == 0 ? 0 : errno);
  probe_str(&p, "target", target);
  return probe_finish(&p, rc == 0 ? "symlink planted" : "symlink failed");
}
