#include "supervisor/run_record.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/run_id.h"
#include "common/strict_json.h"

namespace safex::supervisor {
namespace {

constexpr char kSuffix[] = ".run";
constexpr size_t kMaxRecordBytes = 64 * 1024;

Status WriteAllFd(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("write", path, errno);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<std::string> ReadSmall(int fd, const std::string& path) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof(buf), static_cast<off_t>(out.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("read", path, errno);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxRecordBytes) return Status::InvalidArgument(path + " is too large");
  }
  return out;
}

}  // namespace

std::string RecordsDirFor(const std::string& audit_db) {
  if (audit_db.empty() || audit_db == ":memory:") return "";
  size_t slash = audit_db.rfind('/');
  std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : audit_db.substr(0, slash));
  return (dir == "/" ? "" : dir) + "/runs";
}

RunRecord::RunRecord(RunRecord&& o) noexcept
    : path_(std::exchange(o.path_, std::string())), lock_(std::move(o.lock_)) {}

RunRecord& RunRecord::operator=(RunRecord&& o) noexcept {
  if (this != &o) {
    Remove().ok();
    path_ = std::exchange(o.path_, std::string());
    lock_ = std::move(o.lock_);
  }
  return *this;
}

RunRecord::~RunRecord() { Remove().ok(); }

Result<RunRecord> RunRecord::Create(const std::string& dir, const RunRecordInfo& info) {
  if (!IsValidRunId(info.run_id)) {
    return Status::InvalidArgument("run record: bad run id '" + info.run_id + "'");
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::Errno("mkdir", dir, errno);
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return Status::Errno("lstat", dir, errno);
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(dir + " is not a directory");

  nlohmann::json j;
  j["run_id"] = info.run_id;
  j["pid"] = info.pid;
  j["audit_db"] = info.audit_db;
  j["state_root"] = info.state_root;
  j["input_dir"] = info.input_dir;
  j["start_ns"] = info.start_ns;
  std::string text = j.dump() + "\n";

  const std::string final_path = dir + "/" + info.run_id + kSuffix;
  // Locked before it has a name (an unnamed O_TMPFILE, flock'ed, written, then linked into place):
  // a concurrent sweep never sees an unlocked record of a live run, not even for an instant.
  // linkat fails if the name exists: a run id is never taken twice.
  UniqueFd fd(open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) return Status::Errno("open(O_TMPFILE)", dir, errno);
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return Status::Errno("flock", final_path, errno);
  SAFEX_RETURN_IF_ERROR(WriteAllFd(fd.get(), text, final_path));
  // Not synced (nor is the directory after the link): a record only has to outlive its owner
  // process, and the page cache does; a machine crash kills every owner, and the runs it leaves
  // without a record are closed by the first sweep of the next boot
  // (sweep.h, CloseRunsFromEarlierBoots). Two syncs less on every run's critical path.
  // Security: AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH (the supervisor runs as root); the fd is an
  // unnamed file just created in the 0700 records directory.
  if (linkat(fd.get(), "", AT_FDCWD, final_path.c_str(), AT_EMPTY_PATH) != 0) {
    return Status::Errno("linkat", final_path, errno);
  }
  RunRecord r;
  r.path_ = final_path;
  r.lock_ = std::move(fd);
  return r;
}

Status RunRecord::Remove() {
  if (path_.empty()) return Status::Ok();
  Status st = Status::Ok();
  if (unlink(path_.c_str()) != 0 && errno != ENOENT) st = Status::Errno("unlink", path_, errno);
  path_.clear();
  lock_.Reset();  // after the unlink: recovery never takes the lock of a record still named
  return st;
}

void RunRecord::Abandon() {
  path_.clear();
  lock_.Reset();
}

Result<RunRecordInfo> ParseRunRecord(const std::string& text) {
  // Read back by crash recovery (as root): nothing but what Create wrote is accepted.
  auto parsed = ParseStrictJson(text);
  if (!parsed.ok()) {
    return Status::InvalidArgument("run record: not strict JSON: " + parsed.status().message());
  }
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return Status::InvalidArgument("run record: not a JSON object");
  RunRecordInfo info;
  auto str = [&](const char* k, std::string* out) {
    auto it = j.find(k);
    if (it != j.end() && it->is_string()) *out = it->get<std::string>();
  };
  auto num = [&](const char* k, int64_t* out) {
    auto it = j.find(k);
    if (it != j.end() && it->is_number_integer()) *out = it->get<int64_t>();
  };
  str("run_id", &info.run_id);
  str("audit_db", &info.audit_db);
  str("state_root", &info.state_root);
  str("input_dir", &info.input_dir);
  num("pid", &info.pid);
  num("start_ns", &info.start_ns);
  if (!IsValidRunId(info.run_id)) return Status::InvalidArgument("run record: bad run id");
  return info;
}

Result<std::vector<StaleRecord>> TakeStaleRecords(const std::string& dir) {
  std::vector<StaleRecord> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return Status::Errno("opendir", dir, errno);
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) names.emplace_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    if (name.starts_with(".") && name.ends_with(".tmp")) {
      // A record that never got its name, made by versions that wrote records under a temporary
      // name: its owner died inside Create (a live owner holds its lock). Nothing started under
      // it.
      UniqueFd fd(open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
      if (fd && flock(fd.get(), LOCK_EX | LOCK_NB) == 0) unlink(path.c_str());
      continue;
    }
    if (!name.ends_with(kSuffix)) continue;
    std::string run_id = name.substr(0, name.size() - std::strlen(kSuffix));
    if (!IsValidRunId(run_id)) continue;
    UniqueFd fd(open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) continue;                                      // gone meanwhile: its run ended
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // a live owner holds it
    // The owner may have finished (unlink, then unlock) between our open and our flock: only a
    // record still linked under its name is stale.
    struct stat by_fd {
    }, by_name{};
    if (fstat(fd.get(), &by_fd) != 0 || lstat(path.c_str(), &by_name) != 0 ||
        by_fd.st_ino != by_name.st_ino || by_fd.st_dev != by_name.st_dev) {
      continue;
    }
    StaleRecord r;
    r.path = path;
    auto text = ReadSmall(fd.get(), path);
    auto info = text.ok() ? ParseRunRecord(*text) : Result<RunRecordInfo>(text.status());
    if (info.ok() && info->run_id == run_id) {
      r.info = std::move(info).value();
    } else {
      r.readable = false;
      r.info.run_id = run_id;
    }
    r.lock = std::move(fd);
    out.push_back(std::move(r));
  }
  return out;
}

Status RemoveStaleRecord(StaleRecord& record) {
  if (record.path.empty()) return Status::Ok();
  Status st = Status::Ok();
  if (unlink(record.path.c_str()) != 0 && errno != ENOENT) {
    st = Status::Errno("unlink", record.path, errno);
  }
  record.path.clear();
  record.lock.Reset();
  return st;
}

}  // namespace safex::supervisor
