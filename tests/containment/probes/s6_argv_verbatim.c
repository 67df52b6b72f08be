// S6: argv with shell metacharacters. Prints every argument hex-encoded (so any byte survives
// the stdout validators). Contained: the runner finds exactly the bytes it passed, and nothing
// the metacharacters would have done (e.g. a file a `$(touch ...)` would create) happened.
#include "probe.h"

int main(int argc, char** argv) {
  Probe p;
  probe_begin(&p, "S6", "argv with shell metacharacters");
  probe_int(&p, "argc", argc);
  for (int i = 1; i < argc; ++i) {
    char hex[4096];
    size_t n = 0;
    for (const unsigned char* c = (const unsigned char*)argv[i]; *c != 0 && n + 3 < sizeof hex;
         ++c) {
      n += (size_t)snprintf(hex + n, sizeof hex - n, "%02x", *c);
    }
    hex[n] = 0;
    char key[32];
    snprintf(key, sizeof key, "arg%d", i);
    probe_str(&p, key, hex);
  }
  char result[64];
  snprintf(result, sizeof result, "%d arguments received", argc - 1);
  return probe_finish(&p, result);
}
