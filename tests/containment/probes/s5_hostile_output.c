// S5: hostile output. Modes:
//   utf8    invalid UTF-8, ANSI escapes (clear screen, title, hyperlink), NUL, on stdout and
//           stderr
//   ansi    valid UTF-8 with ANSI escapes only (for a policy that strips control characters)
//   secret  an AWS-access-key-shaped string on stdout
//   json    a deeply nested JSON document (nested arrays, argv[2] levels) in the output file
//           argv[3]
// The runner checks the validator verdict, that logs and reports escape the bytes, and that the
// supervisor stayed within bounded time and memory.
#include <fcntl.h>

#include "probe.h"

static void Out(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

int main(int argc, char** argv) {
  if (argc < 2) return kProbeError;
  const char* mode = argv[1];
  if (strcmp(mode, "utf8") == 0) {
    static const char bad[] =
        "caf\xc3\x28 \xff\xfe \xed\xa0\x80 \x1b[2J\x1b[H\x1b]0;pwned\x07 "
        "\x1b]8;;http://198.18.0.1/\x1b\\link\x1b]8;;\x1b\\ \0nul\r\n";
    Out(STDOUT_FILENO, bad, sizeof bad - 1);
    Out(STDERR_FILENO, bad, sizeof bad - 1);
    return 0;
  }
  if (strcmp(mode, "ansi") == 0) {
    static const char ansi[] = "\x1b[31mred\x1b[0m \x1b]0;title\x07 plain\n";
    Out(STDOUT_FILENO, ansi, sizeof ansi - 1);
    return 0;
  }
  if (strcmp(mode, "secret") == 0) {
    static const char secret[] = "key=AKIAIOSFODNN7EXAMPLE\n";
    Out(STDOUT_FILENO, secret, sizeof secret - 1);
    return 0;
  }
  if (strcmp(mode, "json") == 0 && argc == 4) {
    long depth = atol(argv[2]);
    int fd = open(argv[3], O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || depth <= 0 || depth > (1 << 22)) return kProbeError;
    static char buf[1 << 16];
    memset(buf, '[', sizeof buf);
    for (long left = depth; left > 0; left -= (long)sizeof buf) {
      Out(fd, buf, left < (long)sizeof buf ? (size_t)left : sizeof buf);
    }
    memset(buf, ']', sizeof buf);
    for (long left = depth; left > 0; left -= (long)sizeof buf) {
      Out(fd, buf, left < (long)sizeof buf ? (size_t)left : sizeof buf);
    }
    close(fd);
    Probe p;
    probe_begin(&p, "S5", "deeply nested JSON output");
    probe_int(&p, "depth", depth);
    return probe_finish(&p, "written");
  }
  return kProbeError;
}
