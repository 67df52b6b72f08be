#include "drivers/gvisor/runsc.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>

#include "common/unique_fd.h"

namespace safex::drivers::gvisor {

std::string RunscVersionString(std::string_view out) {
  constexpr std::string_view kPrefix = "runsc version ";
  size_t p = out.find(kPrefix);
  if (p == std::string_view::npos) return "";
  std::string_view rest = out.substr(p + kPrefix.size());
  size_t end = rest.find_first_of(" \n\r\t");
  return std::string(rest.substr(0, end));
}

std::optional<int> RunscReleaseDate(std::string_view v) {
  // The date is the first run of 8 digits starting with 20.
  for (size_t i = 0; i + 8 <= v.size(); ++i) {
    bool digits = true;
    for (size_t j = 0; j < 8 && digits; ++j) digits = v[i + j] >= '0' && v[i + j] <= '9';
    bool bounded = (i == 0 || v[i - 1] < '0' || v[i - 1] > '9') &&
                   (i + 8 == v.size() || v[i + 8] < '0' || v[i + 8] > '9');
    if (digits && bounded && v[i] == '2' && v[i + 1] == '0') {
      int date = 0;
      std::from_chars(v.data() + i, v.data() + i + 8, date);
      return date;
    }
  }
  return std::nullopt;
}

Result<ToolOutput> RunTool(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                           size_t cap) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  UniqueFd r(p[0]), w(p[1]);
  UniqueFd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!devnull) return Status::Errno("open", "/dev/null", errno);
  SpawnOptions so;
  so.argv = argv;
  so.fds = {{0, devnull.get()}, {1, w.get()}, {2, w.get()}};
  SAFEX_ASSIGN_OR_RETURN(Subprocess child, Subprocess::Spawn(so));
  w.Reset();
  devnull.Reset();

  ToolOutput out;
  auto deadline = Subprocess::Clock::now() + timeout;
  bool eof = false;
  while (!eof) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Subprocess::Clock::now());
    if (left.count() <= 0) {
      out.timed_out = true;
      break;
    }
    pollfd pfd{r.get(), POLLIN, 0};
    int n = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), INT_MAX)));
    if (n < 0 && errno != EINTR) return Status::Errno("poll", argv[0], errno);
    if (n <= 0) continue;
    char buf[4096];
    ssize_t got = read(r.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      eof = true;
      break;
    }
    size_t take = std::min(static_cast<size_t>(got), cap - std::min(cap, out.output.size()));
    out.output.append(buf, take);
  }
  if (out.timed_out) {
    out.status = child.KillAndWait();
    return out;
  }
  SAFEX_ASSIGN_OR_RETURN(std::optional<ExitStatus> st, child.Wait(deadline));
  if (!st) {
    out.timed_out = true;
    out.status = child.KillAndWait();
  } else {
    out.status = *st;
  }
  return out;
}

}  // namespace safex::drivers::gvisor
