// A child process for the crash and concurrency tests: appends start+end pairs to an audit log
// and, after each commit, writes "seq hash\n" to a report fd (so the parent knows exactly which
// events were committed before it SIGKILLs us).
//
//   audit_test_writer DB PREFIX COUNT [REPORT_FD [PAUSE_US]]
// COUNT 0: until killed. REPORT_FD -1: no reports. PAUSE_US: sleep between a start and its end,
// as a real run would (default 0).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "audit/audit_log.h"

namespace {

void Report(int fd, const safex::audit::EventRef& ref) {
  if (fd < 0) return;
  std::string line = std::to_string(ref.seq) + " " + ref.hash + "\n";
  // One write per line: a pipe write under PIPE_BUF is atomic, so a kill never splits a line.
  if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(4);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s DB PREFIX COUNT [REPORT_FD]\n", argv[0]);
    return 2;
  }
  const std::string db = argv[1];
  const std::string prefix = argv[2];
  const long count = std::strtol(argv[3], nullptr, 10);
  const int fd = argc > 4 ? static_cast<int>(std::strtol(argv[4], nullptr, 10)) : -1;
  const long pause_us = argc > 5 ? std::strtol(argv[5], nullptr, 10) : 0;
  safex::audit::AuditOptions opts;
  opts.min_free_bytes = 0;
  opts.busy_timeout_ms = 60000;
  auto log = safex::audit::AuditLog::Open(db, opts);
  if (!log.ok()) {
    std::fprintf(stderr, "open: %s\n", log.status().message().c_str());
    return 3;
  }
  for (long i = 0; count == 0 || i < count; ++i) {
    safex::audit::RunStart start;
    start.run_id = prefix + "-" + std::to_string(i);
    start.requester.uid = 1000;
    start.requester.pid = static_cast<int32_t>(getpid());
    start.policy_name = "crash-test";
    start.backend = "gvisor";
    start.argv = {"/bin/true", std::to_string(i)};
    safex::audit::EventRef ref;
    safex::Status st = (*log)->RecordStart(start, &ref);
    if (!st.ok()) {
      std::fprintf(stderr, "start: %s\n", st.message().c_str());
      return 3;
    }
    Report(fd, ref);
    if (pause_us > 0) usleep(static_cast<useconds_t>(pause_us));
    safex::audit::RunEnd end;
    end.run_id = start.run_id;
    end.exit_code = 0;
    end.wall_ns = 1000;
    st = (*log)->RecordEnd(end, &ref);
    if (!st.ok()) {
      std::fprintf(stderr, "end: %s\n", st.message().c_str());
      return 3;
    }
    Report(fd, ref);
  }
  return 0;
}
