#include "drivers/gvisor/sandbox_log.h"

#include <charconv>

namespace safex::drivers::gvisor {
namespace {

bool ParseInt(std::string_view s, int* out) {
  size_t end = 0;
  while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
  if (end == 0) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + end, *out);
  return ec == std::errc();
}

bool IsNameChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

}  // namespace

void SandboxLogScanner::SetLogged(std::set<std::string> names, bool log_all) {
  log_names_ = std::move(names);
  log_all_ = log_all;
}

void SandboxLogScanner::Feed(std::string_view data) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    std::string_view piece = data.substr(0, nl == std::string_view::npos ? data.size() : nl);
    if (partial_.size() < kMaxLine) {
      partial_.append(piece.substr(0, kMaxLine - partial_.size()));
    }
    if (nl == std::string_view::npos) return;
    Line(partial_);
    partial_.clear();
    data.remove_prefix(nl + 1);
  }
}

void SandboxLogScanner::Finish() {
  if (!partial_.empty()) Line(partial_);
  partial_.clear();
}

void SandboxLogScanner::Line(std::string_view line) {
  ++lines_;
  if (size_t s = line.find(" strace.go:"); s != std::string_view::npos) {
    // "... strace.go:611] [   1:   1] comm X name(args) = ret errno=11 (try again) (1.2ms)"
    size_t hdr = line.find("] [", s);
    if (hdr == std::string_view::npos) return;
    size_t tid_end = line.find("] ", hdr + 3);
    if (tid_end == std::string_view::npos) return;
    std::string_view rest = line.substr(tid_end + 2);
    size_t paren = rest.find('(');
    if (paren == std::string_view::npos) return;
    size_t name_start = paren;
    while (name_start > 0 && IsNameChar(rest[name_start - 1])) --name_start;
    if (name_start == paren || name_start < 3) return;
    std::string_view kind = rest.substr(name_start - 3, 3);
    std::string name(rest.substr(name_start, paren - name_start));
    if (kind == " X ") {
      bool forkish = name == "clone" || name == "clone3" || name == "fork" || name == "vfork";
      if (forkish && rest.find(") = ", paren) != std::string_view::npos &&
          rest.find(" errno=11 ", paren) != std::string_view::npos) {
        ++fork_eagain_;
      }
    } else if (kind == " E ") {
      if (log_all_ || log_names_.count(name) != 0) ++logged_[name];
    }
    return;
  }
  if (size_t a = line.find("] application exiting with "); a != std::string_view::npos) {
    if (line.find(" boot.go:") == std::string_view::npos) return;
    std::string_view what = line.substr(a + std::string_view("] application exiting with ").size());
    constexpr std::string_view kExit = "exit status ";
    constexpr std::string_view kSignal = "killed by signal ";
    int v = 0;
    if (what.starts_with(kExit) && ParseInt(what.substr(kExit.size()), &v)) {
      app_exit_ = AppExit{false, v};
    } else if (what.starts_with(kSignal) && ParseInt(what.substr(kSignal.size()), &v)) {
      app_exit_ = AppExit{true, v};
    }
    return;
  }
  if (line.find("] EXEC: [") != std::string_view::npos) app_started_ = true;
}

}  // namespace safex::drivers::gvisor
