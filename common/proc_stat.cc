#include "common/proc_stat.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "common/small_file.h"

namespace safex {
namespace {

// The next space-separated field of `rest` (consumed), or "" at its end.
std::string_view NextField(std::string_view& rest) {
  size_t b = rest.find_first_not_of(" \n");
  if (b == std::string_view::npos) {
    rest = {};
    return {};
  }
  size_t e = rest.find_first_of(" \n", b);
  if (e == std::string_view::npos) e = rest.size();
  std::string_view f = rest.substr(b, e - b);
  rest.remove_prefix(e);
  return f;
}

template <typename T>
bool Number(std::string_view f, T* out) {
  auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), *out);
  return ec == std::errc() && end == f.data() + f.size();
}

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  const size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  ProcStat s;
  s.comm = std::string(text.substr(open + 1, close - open - 1));
  std::string_view rest = text.substr(close + 1);
  for (int field = 3; field <= 22; ++field) {
    std::string_view f = NextField(rest);
    if (f.empty()) return std::nullopt;
    bool ok = true;
    switch (field) {
      case 3:
        ok = f.size() == 1;
        s.state = f[0];
        break;
      case 4:
        ok = Number(f, &s.ppid);
        break;
      case 14:
        ok = Number(f, &s.utime_ticks);
        break;
      case 15:
        ok = Number(f, &s.stime_ticks);
        break;
      case 22:
        ok = Number(f, &s.start_ticks);
        break;
      default:
        break;
    }
    if (!ok) return std::nullopt;
  }
  return s;
}

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  const std::string text = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat").value_or("");
  if (text.empty()) return std::nullopt;
  return ParseProcStat(text);
}

std::optional<int64_t> BootTimeSeconds() {
  const std::string text = ReadSmallFile("/proc/stat").value_or("");
  for (size_t p = 0; p < text.size();) {
    size_t eol = text.find('\n', p);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + p, eol - p);
    int64_t seconds = 0;
    if (line.starts_with("btime ") && Number(line.substr(6), &seconds)) return seconds;
    p = eol + 1;
  }
  return std::nullopt;
}

int64_t TicksToNs(uint64_t ticks) {
  const long hz = std::max<long>(sysconf(_SC_CLK_TCK), 1);
  return static_cast<int64_t>(ticks) * (1'000'000'000 / hz);
}

}  // namespace safex
