#include "supervisor/oci/oci_runtime.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "common/version.h"
#include "supervisor/oci/container_state.h"
#include "supervisor/oci/monitor.h"

namespace safex::supervisor::oci {
namespace {

struct Global {
  std::string root = "/run/safex-oci";
  std::string log;
  std::string log_format = "text";
  bool debug = false;
  bool systemd_cgroup = false;
  std::vector<std::string> argv;  // as started, for the hand-over of pause containers to runc
};

struct CreateFlags {
  std::string bundle = ".";
  std::string pid_file;
  std::string console_socket;
  int preserve_fds = 0;
  bool no_pivot = false, no_new_keyring = false, detach = false;
  std::string id;
};

OciLog LogOf(const Global& g) { return OciLog(g.log, g.log_format == "json"); }

// The node's host config: SAFEX_HOST_CONFIG names another (tests, a node with its own layout);
// the variable comes from containerd's environment, which only root sets.
std::string HostConfigPath() {
  const char* p = getenv("SAFEX_HOST_CONFIG");
  return p != nullptr && *p != '\0' ? p : compiler::kDefaultHostConfigPath;
}

int Fail(const Global& g, const std::string& message) {
  LogOf(g).Error(message);
  return 1;
}

// A pod's sandbox (pause) container, and any later call for it, goes to runc as it came: it
// runs no code of the pod's, only holds the pod's namespaces (docs/kubernetes.md).
[[noreturn]] void HandToRunc(const Global& g, const std::string& runc) {
  std::vector<char*> argv;
  std::string name = runc;
  argv.push_back(name.data());
  for (size_t i = 1; i < g.argv.size(); ++i) argv.push_back(const_cast<char*>(g.argv[i].c_str()));
  argv.push_back(nullptr);
  execv(runc.c_str(), argv.data());
  LogOf(g).Error("cannot start runc at " + runc +
                 " for a pod's sandbox container: " + strerror(errno));
  _exit(1);
}

// Whether runc, not safex-oci, holds this container (a pod's sandbox container).
bool HeldByRunc(const Global& g, const std::string& id) {
  struct stat st {};
  std::string dir = ContainerDir(g.root, id);
  return lstat((dir + "/state.json").c_str(), &st) == 0 &&
         lstat((dir + "/safex.json").c_str(), &st) != 0;
}

std::string RuncPath() {
  auto host = compiler::LoadHostConfigFile(HostConfigPath());
  return host.ok() ? host->oci.runc : compiler::OciSettings().runc;
}

Status WritePidFile(const std::string& path, pid_t pid) {
  if (path.empty()) return Status::Ok();
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Errno("open", tmp, errno);
  std::string text = std::to_string(pid);
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) return Status::Errno("write", path, errno);
  return Status::Ok();
}

// Forks the monitor and waits until it is ready; its pid (0 on failure).
pid_t StartMonitor(const MonitorArgs& args) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return 0;
  // Blocked before the fork, so that no kill signal can end the monitor before its watcher
  // reads them; the mask is the monitor's from its first instruction.
  sigset_t set, old;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1}) sigaddset(&set, s);
  sigprocmask(SIG_BLOCK, &set, &old);
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    RunMonitor(args, ready[1]);
  }
  sigprocmask(SIG_SETMASK, &old, nullptr);
  close(ready[1]);
  char byte = 0;
  ssize_t n;
  do {
    n = read(ready[0], &byte, 1);
  } while (n < 0 && errno == EINTR);
  close(ready[0]);
  if (pid > 0 && n != 1) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return 0;
  }
  return pid < 0 ? 0 : pid;
}

int Create(const Global& g, const CreateFlags& f) {
  if (geteuid() != 0) return Fail(g, "safex-oci create needs root (cgroups, sandbox state)");
  if (Status st = CheckContainerId(f.id); !st.ok()) return Fail(g, st.message());
  if (!f.console_socket.empty()) {
    return Fail(g, "a terminal (--console-socket) is refused: no safex policy allows one");
  }
  if (f.preserve_fds > 0) return Fail(g, "--preserve-fds is refused: a sandbox inherits no fds");
  if (g.systemd_cgroup) {
    return Fail(g, "--systemd-cgroup is not supported: set SystemdCgroup = false for safex");
  }
  char* real = realpath(f.bundle.c_str(), nullptr);
  if (real == nullptr) return Fail(g, "bundle " + f.bundle + ": " + strerror(errno));
  std::string bundle = real;
  free(real);
  MonitorArgs args;
  args.id = f.id;
  args.host_config_path = HostConfigPath();
  args.log = LogOf(g);
  auto host = compiler::LoadHostConfigFile(args.host_config_path);
  if (!host.ok()) return Fail(g, host.status().message());
  args.host = std::move(*host);
  auto spec = LoadContainerSpec(bundle);
  if (!spec.ok()) return Fail(g, spec.status().message());
  if (PodIdentityOf(*spec).IsPodSandbox()) {
    // Only what a pause container is: kubelet's /pause and nothing added. The annotation is
    // containerd's CRI's own (a node must not pass io.kubernetes.cri.* through from pods).
    if (spec->args != std::vector<std::string>{"/pause"} || !spec->devices.empty()) {
      return Fail(g, "a pod sandbox container must run /pause and add no devices");
    }
    LogOf(g).Info(f.id + ": a pod's sandbox (pause) container: handed to runc unchanged");
    HandToRunc(g, args.host.oci.runc);
  }
  if (spec->terminal) return Fail(g, "a terminal is refused: no safex policy allows one");
  args.spec = std::move(*spec);

  if (Status st = MakeContainerDir(g.root, f.id); !st.ok()) return Fail(g, st.message());
  args.dir = ContainerDir(g.root, f.id);
  if (mkfifo((args.dir + "/exec.fifo").c_str(), 0600) != 0) {
    Status st = Status::Errno("mkfifo", args.dir + "/exec.fifo", errno);
    RemoveContainerDir(args.dir).ok();
    return Fail(g, st.message());
  }
  pid_t pid = StartMonitor(args);
  ContainerRecord record{f.id,
                         bundle,
                         pid,
                         pid > 0 ? ProcessStartTime(pid) : 0,
                         Rfc3339Now(),
                         args.spec.cgroups_path,
                         args.spec.annotations};
  Status st =
      pid > 0 ? WriteRecord(args.dir, record) : Status::Internal("the monitor did not start");
  if (st.ok()) st = WritePidFile(f.pid_file, pid);
  if (!st.ok()) {
    if (pid > 0) kill(pid, SIGKILL);
    RemoveContainerDir(args.dir).ok();
    return Fail(g, st.message());
  }
  return 0;
}

Result<ContainerRecord> Existing(const Global& g, const std::string& id) {
  SAFEX_RETURN_IF_ERROR(CheckContainerId(id));
  return ReadRecord(ContainerDir(g.root, id));
}

// Opens exec.fifo (the monitor is blocked writing to it) and takes its byte: the run begins.
int Start(const Global& g, const std::string& id) {
  auto r = Existing(g, id);
  if (!r.ok()) return Fail(g, r.status().message());
  std::string dir = ContainerDir(g.root, id);
  if (StatusOf(dir, *r) != ContainerStatus::kCreated) {
    return Fail(g, "cannot start container " + id + ": it is not in the created state");
  }
  int fd = open((dir + "/exec.fifo").c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Fail(g, "cannot start container " + id + ": " + strerror(errno));
  // The monitor writes its byte once the container's sandbox is booted (which may take a while
  // on a loaded node) and exits soon after when it refuses the container; the byte stays in
  // the fifo, so it is read before the monitor's liveness is asked.
  char byte = 0;
  bool got = false;
  auto until = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (!got && std::chrono::steady_clock::now() < until) {
    struct pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, 50);
    got = read(fd, &byte, 1) == 1;
    if (!got && !MonitorAlive(*r)) got = read(fd, &byte, 1) == 1;
    if (!got && !MonitorAlive(*r)) break;
  }
  close(fd);
  if (!got) return Fail(g, "cannot start container " + id + ": its monitor did not answer");
  int m = open((dir + "/started").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (m >= 0) close(m);
  unlink((dir + "/exec.fifo").c_str());
  return 0;
}

int State(const Global& g, const std::string& id) {
  auto r = Existing(g, id);
  if (!r.ok()) return Fail(g, r.status().message());
  std::cout << StateJson(*r, StatusOf(ContainerDir(g.root, id), *r)).dump(2) << "\n";
  return 0;
}

// "9", "KILL", "SIGKILL" -> 9; 0 for anything else.
int ParseSignal(const std::string& s) {
  static const std::map<std::string, int> kNames = {
      {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"STOP", SIGSTOP}, {"CONT", SIGCONT}};
  if (!s.empty() && std::all_of(s.begin(), s.end(), ::isdigit)) return std::atoi(s.c_str());
  auto it = kNames.find(s.rfind("SIG", 0) == 0 ? s.substr(3) : s);
  return it == kNames.end() ? 0 : it->second;
}

// TERM, INT, HUP and QUIT go to the monitor as they are and KILL as USR1 (the monitor must live
// to record the run); each ends the run. Other signals are refused: a sandboxed program gets no
// signal from outside but the end of its run.
int Kill(const Global& g, const std::string& id, const std::string& signal) {
  auto r = Existing(g, id);
  if (!r.ok()) return Fail(g, r.status().message());
  int sig = ParseSignal(signal);
  if (sig != SIGTERM && sig != SIGINT && sig != SIGHUP && sig != SIGQUIT && sig != SIGKILL) {
    return Fail(g, "signal " + signal +
                       " is not passed to a sandbox; TERM, INT, HUP, QUIT and KILL end its run");
  }
  if (!MonitorAlive(*r)) return Fail(g, "container " + id + " is not running");
  if (kill(r->pid, sig == SIGKILL ? SIGUSR1 : sig) != 0) {
    return Fail(g, "kill " + id + ": " + strerror(errno));
  }
  return 0;
}

bool WaitGone(const ContainerRecord& r, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (MonitorAlive(r)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// A running container is deleted only with --force: its run is stopped (recorded interrupted)
// first, and killed outright if it has not ended within 10 s.
int Delete(const Global& g, const std::string& id, bool force) {
  auto r = Existing(g, id);
  if (!r.ok()) {
    if (force && r.status().code() == Status::Code::kNotFound) return 0;
    return Fail(g, r.status().message());
  }
  if (MonitorAlive(*r)) {
    if (!force) return Fail(g, "cannot delete container " + id + ": it is running");
    kill(r->pid, SIGUSR1);
    if (!WaitGone(*r, std::chrono::seconds(10))) {
      kill(r->pid, SIGKILL);
      WaitGone(*r, std::chrono::seconds(2));
    }
  }
  auto parent = CgroupParentOf(r->cgroups_path);
  if (parent.ok()) {
    if (Status st = RemoveContainerCgroup(*parent); !st.ok()) LogOf(g).Warning(st.message());
  }
  if (Status st = RemoveContainerDir(ContainerDir(g.root, id)); !st.ok()) {
    return Fail(g, st.message());
  }
  return 0;
}

int Ps(const Global& g, const std::string& id) {
  auto r = Existing(g, id);
  if (!r.ok()) return Fail(g, r.status().message());
  nlohmann::json pids = nlohmann::json::array();
  if (MonitorAlive(*r)) pids.push_back(r->pid);
  std::cout << pids.dump() << "\n";
  return 0;
}

// The runtime-spec's features document: what the shim may ask of this runtime.
int Features() {
  nlohmann::json j = {
      {"ociVersionMin", "1.0.0"},
      {"ociVersionMax", "1.1.0"},
      {"hooks", nlohmann::json::array()},
      {"mountOptions", {"bind", "rbind", "ro", "rw", "nosuid", "nodev", "noexec"}},
      {"linux",
       {{"namespaces", {"pid", "network", "ipc", "uts", "mount"}},
        {"capabilities", nlohmann::json::array()},
        {"cgroup", {{"v1", true}, {"v2", true}, {"systemd", false}, {"systemdUser", false}}},
        {"seccomp", {{"enabled", true}}},
        {"apparmor", {{"enabled", false}}},
        {"selinux", {{"enabled", false}}}}},
      {"annotations", {{"dev.safex.runtime", "gvisor"}, {"dev.safex.version", kSafexVersion}}}};
  std::cout << j.dump(2) << "\n";
  return 0;
}

}  // namespace

int RunOciRuntime(int argc, char** argv) {
  Global g;
  g.argv.assign(argv, argv + argc);
  CLI::App app{
      "safex-oci: an OCI runtime (runc's command line) that runs containers under "
      "safex policies",
      "safex-oci"};
  app.set_version_flag("--version",
                       std::string("safex-oci version ") + kSafexVersion + "\nspec: 1.0.2");
  app.require_subcommand(1);
  app.add_option("--root", g.root, "Directory for the containers' state");
  app.add_option("--log", g.log, "File for the runtime's messages");
  app.add_option("--log-format", g.log_format, "json or text")
      ->check(CLI::IsMember({"json", "text"}));
  app.add_flag("--debug", g.debug, "Accepted (messages are always logged)");
  app.add_flag("--systemd-cgroup", g.systemd_cgroup, "Refused: cgroupfs paths only");
  std::string rootless, criu;
  app.add_option("--rootless", rootless, "Accepted (safex-oci runs as root)");
  app.add_option("--criu", criu, "Accepted (checkpoints are not supported)");
  int code = 0;
  CreateFlags cf;
  auto* create = app.add_subcommand("create", "Create a container (its run waits for start)");
  create->add_option("-b,--bundle", cf.bundle, "The bundle directory");
  create->add_option("--pid-file", cf.pid_file, "Where the container's pid is written");
  create->add_option("--console-socket", cf.console_socket, "Refused: no terminal");
  create->add_option("--preserve-fds", cf.preserve_fds, "Refused when above 0");
  create->add_flag("--no-pivot", cf.no_pivot, "Accepted");
  create->add_flag("--no-new-keyring", cf.no_new_keyring, "Accepted");
  create->add_flag("-d,--detach", cf.detach, "Accepted (create always detaches)");
  create->add_option("id", cf.id)->required();
  create->callback([&] { code = Create(g, cf); });
  std::string id, signal = "TERM";
  bool all = false, force = false;
  auto* start = app.add_subcommand("start", "Start a created container's run");
  start->add_option("id", id)->required();
  start->callback(
      [&] { code = HeldByRunc(g, id) ? (HandToRunc(g, RuncPath()), 1) : Start(g, id); });
  auto* state = app.add_subcommand("state", "Print a container's state as JSON");
  state->add_option("id", id)->required();
  state->callback(
      [&] { code = HeldByRunc(g, id) ? (HandToRunc(g, RuncPath()), 1) : State(g, id); });
  auto* killc = app.add_subcommand("kill", "End a container's run with a signal");
  killc->add_flag("-a,--all", all, "Accepted (the run is one sandbox)");
  killc->add_option("id", id)->required();
  killc->add_option("signal", signal);
  killc->callback(
      [&] { code = HeldByRunc(g, id) ? (HandToRunc(g, RuncPath()), 1) : Kill(g, id, signal); });
  auto* del = app.add_subcommand("delete", "Remove a stopped container (--force: any)");
  del->add_flag("-f,--force", force, "Stop a running container first");
  del->add_option("id", id)->required();
  del->callback(
      [&] { code = HeldByRunc(g, id) ? (HandToRunc(g, RuncPath()), 1) : Delete(g, id, force); });
  auto* ps = app.add_subcommand("ps", "List a container's processes (the monitor)");
  std::string format;
  ps->add_option("-f,--format", format, "json");
  ps->add_option("id", id)->required();
  ps->callback([&] { code = HeldByRunc(g, id) ? (HandToRunc(g, RuncPath()), 1) : Ps(g, id); });
  app.add_subcommand("features", "Print what this runtime supports")->callback([&] {
    code = Features();
  });
  for (const char* verb : {"exec", "update", "pause", "resume", "checkpoint", "restore", "events",
                           "run", "spec", "list"}) {
    app.add_subcommand(verb, "Not supported")->allow_extras()->callback([&g, &code, verb] {
      code = Fail(g, std::string("safex-oci does not support `") + verb +
                         "`: a sandbox runs one program under its policy, nothing is added to it");
    });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return Fail(g, std::string("usage: ") + e.what());
  }
  return code;
}

}  // namespace safex::supervisor::oci
