#include "drivers/sandbox_report.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "common/sha256.h"

namespace safex::drivers {
namespace {

// "Key:\tvalue" lines of /proc/self/status.
std::map<std::string, std::string> StatusFields(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    const size_t start = value.find_first_not_of(" \t");
    value = start == std::string::npos ? "" : value.substr(start);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
    out[line.substr(0, colon)] = value;
  }
  return out;
}

// "65534\t65534\t65534\t65534" -> "65534" when all four (real, effective, saved, fs) agree.
std::string Ids(const std::string& field) {
  std::istringstream in(field);
  std::vector<std::string> ids;
  for (std::string id; in >> id;) ids.push_back(id);
  if (ids.empty()) return "?";
  if (std::all_of(ids.begin(), ids.end(), [&](const std::string& i) { return i == ids[0]; })) {
    return ids[0];
  }
  std::string out;
  for (const std::string& i : ids) out += (out.empty() ? "" : "/") + i;
  return out;
}

void AddIdentity(const plan::Plan& plan, std::map<std::string, std::string>& st,
                 const std::string& source, Enforcement* e) {
  const std::string expected = "uid " + std::to_string(plan.process.uid) + " gid " +
                               std::to_string(plan.process.gid) + ", no supplementary groups";
  std::string observed = "unreadable";
  if (st.count("Uid") && st.count("Gid")) {
    observed = "uid " + Ids(st["Uid"]) + " gid " + Ids(st["Gid"]) +
               (st["Groups"].empty() ? ", no supplementary groups" : ", groups " + st["Groups"]);
  }
  e->Compare("process.identity", expected, observed, source + "/proc/self/status");

  std::string caps;
  bool any = false;
  for (const char* k : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    if (!st.count(k)) continue;
    any = true;
    if (st[k].find_first_not_of('0') != std::string::npos) {
      caps += (caps.empty() ? "" : ", ") + std::string(k) + " " + st[k];
    }
  }
  e->Compare("process.capabilities", "none",
             !any           ? "unreadable"
             : caps.empty() ? "none"
                            : caps,
             source + "/proc/self/status");
}

void AddSeccompMode(bool filtered, std::map<std::string, std::string>& st,
                    const std::string& source, Enforcement* e) {
  static const std::map<std::string, std::string> kModes = {
      {"0", "none"}, {"1", "strict"}, {"2", "filter"}};
  auto mode = kModes.find(st["Seccomp"]);
  e->Compare("seccomp.mode", filtered ? "filter" : "none",
             mode == kModes.end() ? "unreadable" : mode->second,
             source + "/proc/self/status (Seccomp)");
}

// /proc/self/limits: "Max open files            256                  256                  files"
// -> {"Max open files": "256/256"}. Columns are separated by two spaces or more.
std::map<std::string, std::string> Limits(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cols;
    size_t i = 0;
    while (i < line.size()) {
      size_t end = line.find("  ", i);
      if (end == std::string::npos) end = line.size();
      if (end > i) cols.push_back(line.substr(i, end - i));
      i = line.find_first_not_of(' ', end);
      if (i == std::string::npos) break;
    }
    if (cols.size() >= 3) out[cols[0]] = cols[1] + "/" + cols[2];
  }
  return out;
}

void AddRlimits(const std::vector<std::pair<std::string, uint64_t>>& want, const std::string& text,
                const std::string& source, Enforcement* e) {
  std::map<std::string, std::string> seen = Limits(text);
  std::string expected, observed;
  for (const auto& [name, value] : want) {
    expected += (expected.empty() ? "" : ", ") + name + " " + std::to_string(value) + "/" +
                std::to_string(value);
    auto it = seen.find(name);
    observed += (observed.empty() ? "" : ", ") + name + " " +
                (it == seen.end() ? std::string("unreadable") : it->second);
  }
  e->Compare("rlimits", expected, observed, source + "/proc/self/limits");
}

// "/data\\040in" (mountinfo's octal escapes) -> "/data in".
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 4, v, 8);
      if (ec == std::errc() && p == s.data() + i + 4) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string Joined(const std::multiset<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : "; ") + l;
  return out;
}

void AddMounts(const plan::Plan& plan, const std::vector<std::string>& infrastructure,
               const std::string& text, const std::string& source, Enforcement* e) {
  // What the backend adds, then the plan's mounts as the backend maps them: a bind is read-only
  // unless the plan says otherwise, input always, output never; a tmpfs is writable.
  std::multiset<std::string> expected(infrastructure.begin(), infrastructure.end());
  for (const plan::Mount& m : plan.mounts) {
    bool ro =
        m.kind != plan::MountKind::kTmpfs && (m.read_only || m.kind == plan::MountKind::kInput);
    if (m.kind == plan::MountKind::kOutput) ro = false;
    expected.insert(MountLine(m.target, ro, m.noexec));
  }
  // mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ... - FSTYPE SOURCE SUPEROPTIONS
  std::multiset<std::string> observed;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x && w.size() < 6;) w.push_back(x);
    if (w.size() < 6) continue;
    std::set<std::string> opts;
    std::istringstream o(w[5]);
    for (std::string opt; std::getline(o, opt, ',');) opts.insert(opt);
    observed.insert(MountLine(Unescape(w[4]), opts.count("ro") > 0, opts.count("noexec") > 0));
  }
  e->Compare("mounts", Joined(expected), observed.empty() ? "unreadable" : Joined(observed),
             source + "/proc/self/mountinfo (target, ro/rw, noexec)");
  e->Observed("mounts.sha256", Sha256Hex(text), source + "SHA-256 of /proc/self/mountinfo");
}

// One "NAME LENGTH\n" + bytes section at `*at`; kUnavailable when not all there yet.
Status TakeSource(std::string_view bytes, size_t* at, const char* name, std::string* out) {
  const size_t nl = bytes.find('\n', *at);
  if (nl == std::string_view::npos) {
    return bytes.size() - *at > 64 ? Status::DataLoss("launcher report: bad section header")
                                   : Status::Unavailable("launcher report: incomplete");
  }
  std::string_view head = bytes.substr(*at, nl - *at);
  const std::string prefix = std::string(name) + " ";
  if (!head.starts_with(prefix)) {
    return Status::DataLoss("launcher report: expected section " + std::string(name));
  }
  size_t len = 0;
  head.remove_prefix(prefix.size());
  auto [p, ec] = std::from_chars(head.data(), head.data() + head.size(), len);
  if (ec != std::errc() || p != head.data() + head.size() || len > 64 * 1024) {
    return Status::DataLoss("launcher report: bad length in section " + std::string(name));
  }
  if (bytes.size() - (nl + 1) < len) return Status::Unavailable("launcher report: incomplete");
  *out = std::string(bytes.substr(nl + 1, len));
  *at = nl + 1 + len;
  return Status::Ok();
}

}  // namespace

std::string MountLine(const std::string& target, bool read_only, bool noexec) {
  return target + (read_only ? " ro" : " rw") + (noexec ? " noexec" : "");
}

Result<SandboxReport> ParseSandboxReport(std::string_view bytes) {
  static constexpr std::string_view kHeader = "SAFEX-LAUNCH 1\n";
  if (bytes.size() < kHeader.size()) {
    if (kHeader.starts_with(bytes)) return Status::Unavailable("launcher report: incomplete");
    return Status::DataLoss("launcher report: bad header");
  }
  if (!bytes.starts_with(kHeader)) return Status::DataLoss("launcher report: bad header");
  size_t at = kHeader.size();
  SandboxReport r;
  SAFEX_RETURN_IF_ERROR(TakeSource(bytes, &at, "status", &r.status));
  SAFEX_RETURN_IF_ERROR(TakeSource(bytes, &at, "limits", &r.limits));
  SAFEX_RETURN_IF_ERROR(TakeSource(bytes, &at, "mountinfo", &r.mountinfo));
  std::string_view rest = bytes.substr(at);
  if (rest.size() < 4) {
    if (std::string_view("end\n").starts_with(rest)) {
      return Status::Unavailable("launcher report: incomplete");
    }
    return Status::DataLoss("launcher report: bad trailer");
  }
  if (rest != "end\n") return Status::DataLoss("launcher report: bad trailer or trailing bytes");
  return r;
}

void AddSandboxReportEvidence(const plan::Plan& plan, const ReportExpectations& x,
                              const SandboxReport& report, Enforcement* e) {
  std::map<std::string, std::string> st = StatusFields(report.status);
  const std::string source = x.source + ": ";
  AddIdentity(plan, st, source, e);
  AddSeccompMode(x.filtered, st, source, e);
  AddRlimits(x.rlimits, report.limits, source, e);
  AddMounts(plan, x.infrastructure_mounts, report.mountinfo, source, e);
}

}  // namespace safex::drivers
