// What safex-oci keeps of one container between the shim's calls, under the --root directory the
// shim names (containerd: /run/containerd/runc/<namespace>): <root>/<id>/ holds
//   safex.json   what create recorded (bundle, the monitor's pid and start time, cgroup path)
//   exec.fifo    the monitor waits on it until `start` opens it (as runc's init does)
//   started      made by `start`: the run has begun
// The monitor is the container's "init" for the shim: the process whose pid create writes to
// --pid-file, whose exit status is the container's (supervisor/oci/monitor.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace safex::supervisor::oci {

struct ContainerRecord {
  std::string id;
  std::string bundle;
  pid_t pid = 0;           // the monitor
  uint64_t pid_start = 0;  // its start time (clock ticks after boot, /proc/<pid>/stat field 22)
  std::string created;     // RFC 3339, UTC
  std::string cgroups_path;
  std::map<std::string, std::string> annotations;
};

enum class ContainerStatus { kCreated, kRunning, kStopped };
const char* ContainerStatusName(ContainerStatus s);

// runc's rule for ids: letters, digits, "_", "+", "-", "." (not "." or ".."), at most 1024.
Status CheckContainerId(const std::string& id);
std::string ContainerDir(const std::string& root, const std::string& id);

// Creates <root> (0700, with parents) and <root>/<id> (0700); AlreadyExists-like
// FailedPrecondition when the container exists.
Status MakeContainerDir(const std::string& root, const std::string& id);
Status WriteRecord(const std::string& dir, const ContainerRecord& record);
// NotFound when the container does not exist.
Result<ContainerRecord> ReadRecord(const std::string& dir);
// Removes the container's directory and what is in it (its own files only).
Status RemoveContainerDir(const std::string& dir);

// The start time of process `pid` (0 if it does not exist or is a zombie).
uint64_t ProcessStartTime(pid_t pid);
bool MonitorAlive(const ContainerRecord& r);
ContainerStatus StatusOf(const std::string& dir, const ContainerRecord& r);

// `runc state` output.
nlohmann::json StateJson(const ContainerRecord& r, ContainerStatus status);

// The run's cgroup parent from the spec's linux.cgroupsPath ("/default/t1" -> "default/t1"), or
// InvalidArgument for a path safex-oci does not place runs in (systemd's "slice:prefix:name"
// form, "..", characters outside [A-Za-z0-9_.-/]). "" stays "" (the host's own parent).
Result<std::string> CgroupParentOf(const std::string& cgroups_path);
// Removes the container's cgroup directory (made below the pod's cgroup for the run's own) in
// every hierarchy: a runtime removes the cgroup it made. A missing one is fine.
Status RemoveContainerCgroup(const std::string& parent);

// "2026-12-03T22:10:00.123456789Z".
std::string Rfc3339Now();

}  // namespace safex::supervisor::oci
