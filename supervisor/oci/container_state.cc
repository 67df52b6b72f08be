#include "supervisor/oci/container_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "common/proc_stat.h"
#include "common/unique_fd.h"
#include "drivers/cgroup/cgroup.h"

namespace safex::supervisor::oci {
namespace {

constexpr const char* kRecordFile = "safex.json";
constexpr const char* kFiles[] = {"safex.json", "safex.json.tmp", "exec.fifo", "started"};

Status MakeDirs(const std::string& path) {
  std::string sofar;
  std::stringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    sofar += "/" + part;
    if (mkdir(sofar.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::Errno("mkdir", sofar, errno);
    }
  }
  return Status::Ok();
}

}  // namespace

const char* ContainerStatusName(ContainerStatus s) {
  switch (s) {
    case ContainerStatus::kCreated:
      return "created";
    case ContainerStatus::kRunning:
      return "running";
    case ContainerStatus::kStopped:
      return "stopped";
  }
  return "stopped";
}

Status CheckContainerId(const std::string& id) {
  if (id.empty() || id.size() > 1024 || id == "." || id == "..") {
    return Status::InvalidArgument("invalid container id \"" + id + "\"");
  }
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '+' || c == '-' || c == '.';
    if (!ok) return Status::InvalidArgument("invalid container id \"" + id + "\"");
  }
  return Status::Ok();
}

std::string ContainerDir(const std::string& root, const std::string& id) { return root + "/" + id; }

Status MakeContainerDir(const std::string& root, const std::string& id) {
  if (root.empty() || root[0] != '/') {
    return Status::InvalidArgument("--root must be an absolute path");
  }
  SAFEX_RETURN_IF_ERROR(MakeDirs(root));
  std::string dir = ContainerDir(root, id);
  if (mkdir(dir.c_str(), 0700) != 0) {
    if (errno == EEXIST) return Status::FailedPrecondition("container " + id + " already exists");
    return Status::Errno("mkdir", dir, errno);
  }
  return Status::Ok();
}

Status WriteRecord(const std::string& dir, const ContainerRecord& r) {
  nlohmann::json j = {{"id", r.id},
                      {"bundle", r.bundle},
                      {"pid", r.pid},
                      {"pid_start", r.pid_start},
                      {"created", r.created},
                      {"cgroups_path", r.cgroups_path},
                      {"annotations", r.annotations}};
  std::string text = j.dump() + "\n";
  std::string tmp = dir + "/safex.json.tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Errno("open", tmp, errno);
  UniqueFd owner(fd);
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return Status::Errno("write", tmp, errno);
  }
  if (rename(tmp.c_str(), (dir + "/" + kRecordFile).c_str()) != 0) {
    return Status::Errno("rename", tmp, errno);
  }
  return Status::Ok();
}

Result<ContainerRecord> ReadRecord(const std::string& dir) {
  std::string path = dir + "/" + kRecordFile;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("container does not exist");
    return Status::Errno("open", path, errno);
  }
  UniqueFd owner(fd);
  std::string text(64 << 10, '\0');
  ssize_t n = read(fd, text.data(), text.size());
  if (n < 0) return Status::Errno("read", path, errno);
  text.resize(static_cast<size_t>(n));
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    ContainerRecord r;
    r.id = j.at("id").get<std::string>();
    r.bundle = j.at("bundle").get<std::string>();
    r.pid = j.at("pid").get<pid_t>();
    r.pid_start = j.at("pid_start").get<uint64_t>();
    r.created = j.at("created").get<std::string>();
    r.cgroups_path = j.at("cgroups_path").get<std::string>();
    r.annotations = j.at("annotations").get<std::map<std::string, std::string>>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Status::DataLoss(path + " is damaged: " + e.what());
  }
}

Status RemoveContainerDir(const std::string& dir) {
  for (const char* f : kFiles) {
    std::string p = dir + "/" + f;
    if (unlink(p.c_str()) != 0 && errno != ENOENT) return Status::Errno("unlink", p, errno);
  }
  if (rmdir(dir.c_str()) != 0 && errno != ENOENT) return Status::Errno("rmdir", dir, errno);
  return Status::Ok();
}

uint64_t ProcessStartTime(pid_t pid) {
  const std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat || stat->state == 'Z' || stat->state == 'X') return 0;
  return stat->start_ticks;
}

bool MonitorAlive(const ContainerRecord& r) {
  return r.pid > 0 && r.pid_start != 0 && ProcessStartTime(r.pid) == r.pid_start;
}

ContainerStatus StatusOf(const std::string& dir, const ContainerRecord& r) {
  if (!MonitorAlive(r)) return ContainerStatus::kStopped;
  struct stat st {};
  return lstat((dir + "/started").c_str(), &st) == 0 ? ContainerStatus::kRunning
                                                     : ContainerStatus::kCreated;
}

nlohmann::json StateJson(const ContainerRecord& r, ContainerStatus status) {
  return {{"ociVersion", "1.0.2"},
          {"id", r.id},
          {"pid", status == ContainerStatus::kStopped ? 0 : r.pid},
          {"status", ContainerStatusName(status)},
          {"bundle", r.bundle},
          {"rootfs", r.bundle + "/rootfs"},
          {"created", r.created},
          {"owner", ""},
          {"annotations", r.annotations}};
}

Result<std::string> CgroupParentOf(const std::string& path) {
  if (path.empty()) return std::string();
  if (path.find(':') != std::string::npos) {
    return Status::InvalidArgument(
        "cgroupsPath \"" + path +
        "\" is in systemd's slice form; safex-oci places runs in cgroupfs paths (set "
        "SystemdCgroup = false for its runtime handler)");
  }
  std::string rel;
  std::stringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    bool ok = part != "." && part != "..";
    for (char c : part) {
      ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.');
    }
    if (!ok) return Status::InvalidArgument("cgroupsPath \"" + path + "\" is not a plain path");
    rel += (rel.empty() ? "" : "/") + part;
  }
  return rel;
}

Status RemoveContainerCgroup(const std::string& parent) {
  if (parent.empty()) return Status::Ok();
  auto host = drivers::cgroup::CgroupHost::Detect();
  if (!host.ok()) return host.status();
  for (const std::string& h : host->HierarchyDirs()) {
    std::string dir = h + "/" + parent;
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) return Status::Errno("rmdir", dir, errno);
  }
  return Status::Ok();
}

std::string Rfc3339Now() {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm {};
  gmtime_r(&ts.tv_sec, &tm);
  char buf[64];
  size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, sizeof buf - n, ".%09ldZ", ts.tv_nsec);
  return buf;
}

}  // namespace safex::supervisor::oci
