#include "drivers/gvisor/run_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "common/fs_tree.h"
#include "drivers/gvisor/runsc.h"

namespace safex::drivers::gvisor {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

Result<Pipe> MakePipe() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  return Pipe{UniqueFd(p[0]), UniqueFd(p[1])};
}

Status SetNonBlocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return Status::Errno("fcntl", errno);
  return Status::Ok();
}

bool DrainInto(UniqueFd& fd, std::string* into, size_t keep) {
  char buf[16384];
  while (fd.valid()) {
    const ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) {
      fd.Reset();
      return false;
    }
    if (keep == 0) continue;
    into->append(buf, static_cast<size_t>(n));
    if (into->size() > keep) {
      const size_t cut = into->find('\n', into->size() - keep);
      into->erase(0, cut == std::string::npos ? into->size() : cut + 1);
    }
  }
  return false;
}

std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  return text.substr(start, end - start + 1);
}

void RunState::Note(const std::string& what, const Status& st) {
  if (st.ok()) return;
  if (!errors.empty()) errors += "; ";
  errors += what + ": " + st.ToString();
}

std::vector<std::string> RunState::Runsc(std::initializer_list<std::string> args) const {
  std::vector<std::string> v{runsc_path, "--root=" + state_dir};
  v.insert(v.end(), args.begin(), args.end());
  return v;
}

void RunState::Park() { frozen = cg.SetFrozen(true).ok(); }

Status RunState::Unpark() {
  if (!frozen) return Status::Ok();
  SAFEX_RETURN_IF_ERROR(cg.SetFrozen(false));
  frozen = false;
  return Status::Ok();
}

void RunState::StopSandbox(std::chrono::milliseconds grace) {
  if (sandbox_stopped) return;
  sandbox_stopped = true;
  // A parked sandbox cannot answer runsc or act on a signal until thawed (best effort: the
  // cgroup kill below thaws again).
  Unpark().ok();
  if (runsc.valid() && !runsc.reaped()) {
    // Ask runsc first: it ends the container cleanly and keeps its state consistent. The cgroup
    // kill is the fallback for a sandbox that does not go (wedged sentry, runsc stuck): every
    // process runsc started for this run (gofer, sandbox, stubs) is in the cgroup.
    auto k = RunTool(Runsc({"kill", "--all", run_id, "KILL"}), std::chrono::milliseconds(1000));
    // A `runsc kill` that failed or ran out of time (a loaded host: the Go start alone can take
    // that long) delivered nothing to wait for: the cgroup kill comes at once, not after `grace`.
    const bool delivered = k.ok() && !k->timed_out && k->status.exited && k->status.code == 0;
    auto st = delivered ? runsc.Wait(Clock::now() + grace) : runsc.TryWait();
    if (!st.ok() || !st->has_value()) {
      if (cg.valid()) cg.KillAll().ok();
      st = runsc.Wait(Clock::now() + std::chrono::milliseconds(500));
      if (!st.ok() || !st->has_value()) runsc.KillAndWait();
    }
  }
  if (cg.valid()) {
    // Wait (briefly) until the kernel has emptied the cgroup.
    auto until = Clock::now() + std::chrono::milliseconds(2000);
    for (;;) {
      auto procs = cg.Procs();
      if (procs.ok() && procs->empty()) break;
      if (Clock::now() > until) {
        Note("processes left in cgroup " + cg.oci_path(), Status::Internal("still busy"));
        break;
      }
      cg.KillAll().ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  // Killing `runsc run` from outside leaves the container recorded as stopped: delete it.
  if (!state_dir.empty() && !ListDirectoryOrEmpty(state_dir).empty()) {
    auto d = RunTool(Runsc({"delete", "--force", run_id}), std::chrono::milliseconds(5000));
    if (!d.ok()) Note("runsc delete", d.status());
    // A sandbox killed from outside cannot remove its control socket and lock file; they go
    // with the private directory. A container state file left behind is an error.
    std::string left;
    for (const std::string& n : ListDirectoryOrEmpty(state_dir)) {
      if (!n.ends_with(".sock") && !n.ends_with(".lock")) left += (left.empty() ? "" : ", ") + n;
    }
    if (!left.empty()) {
      Note("runsc state", Status::Internal("state left in " + state_dir + " (" + left + ")" +
                                           (d.ok() ? ": " + LastLine(d->output) : "")));
    }
  }
}

void RunState::Teardown(std::chrono::milliseconds grace) {
  if (torn_down) return;
  torn_down = true;
  StopSandbox(grace);
  if (net) Note("network teardown", net->Teardown());
  net.reset();
  if (cg.valid()) Note("cgroup removal", cg.Destroy());
  Note("unmount stdio", stdio.Close());
  outputs.UnmountAll([this](const std::string& what, const Status& st) { Note(what, st); });
  Note("unmount bundle", bundle_fs.Unmount());
  Note("removing " + dir.path(), dir.Remove());
}

}  // namespace safex::drivers::gvisor
