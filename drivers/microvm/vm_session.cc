#include "drivers/microvm/vm_session.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "drivers/microvm/vmm_threads.h"
#include "drivers/microvm/wire.h"

namespace safex::microvm {
namespace {

using Clock = std::chrono::steady_clock;

// Bounds the work a guest can cause with tiny frames: far above any honest run's frame count
// (64 KiB data frames: 4M frames would be 256 GiB).
constexpr uint64_t kMaxFrames = 4u * 1024 * 1024;
// Bytes read from the channel per poll wake-up, so the console and deadlines stay serviced.
constexpr size_t kReadBudget = 1024 * 1024;
// A running guest beats once a second; silent this long, it is nudged (vm_session.h).
constexpr std::chrono::seconds kNudgeAfter{2};

size_t MaxPayload(FrameType t) {
  switch (t) {
    case FrameType::kHello:
      return 256;
    case FrameType::kSetupError:
      return 4096;
    case FrameType::kStarted:
      return 0;
    case FrameType::kStdout:
    case FrameType::kStderr:
      return kMaxDataFrame;
    case FrameType::kExit:
      return 4096 + 128;
    case FrameType::kFileBegin:
      return kMaxControlFrame;
    case FrameType::kFileData:
      return kMaxDataFrame;
    case FrameType::kFileEnd:
      return 0;
    case FrameType::kOutputsDone:
      return 8;
    case FrameType::kEvidence:
      return kMaxDataFrame;
    case FrameType::kHeartbeat:
      return kMaxHeartbeatState + 64;
    case FrameType::kSetUp:
      return 0;
    default:
      return 0;
  }
}

void SetNonBlocking(int fd) {
  if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

class Session {
 public:
  Session(const SessionConfig& c) : c_(c), start_(Clock::now()), reader_(kMaxDataFrame) {
    deadline_ = start_ + c_.boot_timeout;
  }

  SessionResult Run(int ctl, int con, int err, int pidfd) {
    ctl_ = ctl;
    pidfd_ = pidfd;
    SetNonBlocking(ctl);
    SetNonBlocking(con);
    SetNonBlocking(err);
    if (c_.resumed_hello) {
      r_.hello = c_.resumed_hello;
      if (c_.request_payload.empty()) {
        SendSetup(FrameType::kSpec, c_.spec_payload);
      } else {
        SendSetup(FrameType::kRequest, c_.request_payload);
      }
    }
    bool vmm_alive = true;
    while (r_.phase != Phase::kDone && r_.violation.empty() && !r_.output_cap_hit) {
      if (c_.cancel != nullptr && c_.cancel->load(std::memory_order_relaxed) != 0) {
        r_.cancelled = true;
        break;
      }
      auto now = Clock::now();
      if (now >= deadline_) {
        r_.timed_out = true;
        break;
      }
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now).count() + 1;
      // The token has no fd to poll: wake up often enough to see it.
      if (c_.cancel != nullptr) ms = std::min<long long>(ms, c_.cancel_poll.count());
      pollfd fds[4];
      int n = 0, i_ctl = -1, i_con = -1, i_err = -1, i_pid = -1;
      if (ctl >= 0) {
        short ev = POLLIN;
        if (out_pos_ < out_.size()) ev |= POLLOUT;
        fds[i_ctl = n++] = {ctl, ev, 0};
      }
      if (con >= 0) fds[i_con = n++] = {con, POLLIN, 0};
      if (err >= 0) fds[i_err = n++] = {err, POLLIN, 0};
      if (vmm_alive) fds[i_pid = n++] = {pidfd, POLLIN, 0};
      if (n == 0) break;
      int rc = poll(fds, static_cast<nfds_t>(n), static_cast<int>(std::min<long long>(ms, 1000)));
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) {
        r_.violation = "poll failed";
        break;
      }
      if (i_con >= 0 && fds[i_con].revents != 0 && !ReadConsole(con)) con = -1;
      if (i_err >= 0 && fds[i_err].revents != 0 && !ReadStderr(err)) err = -1;
      if (i_ctl >= 0 && (fds[i_ctl].revents & POLLOUT) != 0) Flush(ctl);
      if (i_ctl >= 0 && (fds[i_ctl].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        if (!ReadChannel(ctl)) ctl = -1;
      }
      if (ctl >= 0 && r_.phase == Phase::kRunning) NudgeIfSilent();
      if (i_pid >= 0 && fds[i_pid].revents != 0) {
        vmm_alive = false;
        r_.vmm_exited = true;
        // QEMU is gone: whatever it forwarded is in the socket buffer; take all of it (up to EOF,
        // bounded), then stop.
        for (int i = 0; i < 64 && ctl >= 0 && r_.phase != Phase::kDone && r_.violation.empty() &&
                        !r_.output_cap_hit;
             ++i) {
          if (!ReadChannel(ctl)) break;
        }
        if (con >= 0) ReadConsole(con);
        if (err >= 0) ReadStderr(err);
        break;
      }
      if (ctl < 0 && r_.phase != Phase::kDone) {
        // Channel closed before the end: only QEMU holds the other end, so it is exiting. Give it
        // a moment (within the deadline) so the result can say how it ended.
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
        pollfd p{pidfd, POLLIN, 0};
        if (vmm_alive &&
            poll(&p, 1, static_cast<int>(std::clamp<long long>(left.count(), 0, 2000))) > 0) {
          r_.vmm_exited = true;
          if (con >= 0) ReadConsole(con);
          if (err >= 0) ReadStderr(err);
        }
        break;
      }
    }
    r_.t_end = Since();
    if (r_.phase == Phase::kRunning) NoteSilence();
    if (r_.phase == Phase::kRunning && Since() - last_heard_ >= kNudgeAfter && vmm_alive) {
      r_.vmm_threads_at_end = VmmThreads(PidOfPidfd(pidfd_));
    }
    r_.console_tail = Sanitize(console_, c_.console_tail_bytes);
    r_.vmm_stderr = Sanitize(stderr_, c_.stderr_keep_bytes);
    return std::move(r_);
  }

 private:
  std::chrono::nanoseconds Since() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_);
  }

  bool ReadConsole(int fd) {
    char buf[4096];
    for (int i = 0; i < 64; ++i) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
      if (n <= 0) return false;
      console_.append(buf, static_cast<size_t>(n));
      if (console_.size() > 2 * c_.console_tail_bytes) {
        console_.erase(0, console_.size() - c_.console_tail_bytes);
      }
    }
    return true;
  }

  bool ReadStderr(int fd) {
    char buf[4096];
    for (int i = 0; i < 64; ++i) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
      if (n <= 0) return false;
      if (stderr_.size() < c_.stderr_keep_bytes) {
        stderr_.append(buf,
                       std::min(static_cast<size_t>(n), c_.stderr_keep_bytes - stderr_.size()));
      }
    }
    return true;
  }

  void Flush(int fd) {
    while (out_pos_ < out_.size()) {
      ssize_t n = write(fd, out_.data() + out_pos_, out_.size() - out_pos_);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // EAGAIN (retry on POLLOUT) or a closed channel (read side notices)
      out_pos_ += static_cast<size_t>(n);
    }
    out_.clear();
    out_pos_ = 0;
  }

  // False on EOF or error of the channel.
  bool ReadChannel(int fd) {
    char buf[64 * 1024];
    size_t budget = kReadBudget;
    while (budget > 0 && r_.violation.empty() && !r_.output_cap_hit && r_.phase != Phase::kDone) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
      if (n <= 0) return false;
      budget -= std::min(budget, static_cast<size_t>(n));
      reader_.Feed(buf, static_cast<size_t>(n));
      while (r_.violation.empty() && !r_.output_cap_hit && r_.phase != Phase::kDone) {
        std::optional<Frame> f = reader_.Next();
        if (!f) break;
        if (++frames_ > kMaxFrames) {
          r_.violation = "too many frames";
          break;
        }
        if (r_.phase == Phase::kRunning) NoteSilence();
        last_heard_ = Since();
        Handle(*f);
      }
      if (reader_.failed()) r_.violation = reader_.error();
    }
    return true;
  }

  void Unexpected(const Frame& f) {
    r_.violation = "unexpected frame type " + std::to_string(static_cast<uint32_t>(f.type)) +
                   " while " + PhaseName(r_.phase);
  }

  void QueueFrame(FrameType t, std::string_view payload) { AppendFrame(t, payload, &out_); }

  // The longest time the running guest went without a frame, up to now.
  void NoteSilence() { r_.longest_silence = std::max(r_.longest_silence, Since() - last_heard_); }

  // A running guest that has said nothing for kNudgeAfter (no heartbeat, no output) gets an
  // empty kNudge, then one per kNudgeAfter while it stays silent. The agent ignores it; what it
  // does is raise an interrupt in the guest, which wakes a vCPU idling for a timer interrupt that
  // never came. Whether the stall the containment suite met under TCG is of that kind is not
  // known yet: the snapshot of QEMU's threads taken here is there to tell.
  void NudgeIfSilent() {
    const auto now = Since();
    if (now - last_heard_ < kNudgeAfter || now - last_nudge_ < kNudgeAfter) return;
    if (r_.nudges == 0) r_.vmm_threads_at_nudge = VmmThreads(PidOfPidfd(pidfd_));
    QueueFrame(FrameType::kNudge, "");
    Flush(ctl_);
    last_nudge_ = now;
    ++r_.nudges;
  }

  // One frame: the size check, the setup error the guest may send until its program starts, then
  // the phase's own handler (the protocol is a fixed sequence of phases; docs/microvm.md).
  void Handle(const Frame& f) {
    if (f.payload.size() > MaxPayload(f.type)) {
      r_.violation = "oversized frame of type " + std::to_string(static_cast<uint32_t>(f.type));
      return;
    }
    // kSetupError is accepted until the program has started: after that the guest may be hostile
    // and "nothing ran" would be a lie.
    if (f.type == FrameType::kSetupError &&
        (r_.phase == Phase::kBooting || r_.phase == Phase::kSetup)) {
      r_.guest_setup_error = Sanitize(f.payload, 4096);
      r_.phase = Phase::kDone;
      return;
    }
    switch (r_.phase) {
      case Phase::kBooting:
        return WhileBooting(f);
      case Phase::kSetup:
        return WhileSettingUp(f);
      case Phase::kRunning:
        return WhileRunning(f);
      case Phase::kOutputs:
        return WhileReturningOutputs(f);
      case Phase::kDone:
        return;
    }
  }

  // kHello: check the protocol version first (it comes first in every version of kHello, so an
  // initramfs built from other sources gets a message that says so), then send the spec and stdin.
  void WhileBooting(const Frame& f) {
    if (f.type != FrameType::kHello) return Unexpected(f);
    Decoder version_reader(f.payload);
    uint32_t version = 0;
    if (version_reader.U32(&version) && version != kProtocolVersion) {
      r_.violation = "guest agent speaks protocol " + std::to_string(version) + ", the host " +
                     std::to_string(kProtocolVersion) +
                     " (rebuild the initramfs: scripts/build-guest.sh)";
      return;
    }
    std::optional<Hello> h = DecodeHello(f.payload);
    if (!h) {
      r_.violation =
          "malformed hello (an initramfs from other sources? rebuild it: scripts/build-guest.sh)";
      return;
    }
    h->kernel_release = Sanitize(h->kernel_release, 128);
    r_.hello = h;
    r_.t_hello = Since();
    if (c_.spec_payload.empty()) {
      r_.phase = Phase::kDone;  // a probe boot, or a pooled one (resumed later)
      return;
    }
    SendSetup(FrameType::kSpec, c_.spec_payload);
  }

  // The spec (or a pooled VM's request) and stdin after kHello (in this session, or a pooled VM's
  // earlier one).
  void SendSetup(FrameType first, const std::string& payload) {
    QueueFrame(first, payload);
    if (c_.stdin_data) {
      std::string_view in = *c_.stdin_data;
      for (size_t off = 0; off < in.size(); off += kMaxDataFrame) {
        QueueFrame(FrameType::kStdinData, in.substr(off, kMaxDataFrame));
      }
      QueueFrame(FrameType::kStdinEnd, "");
    }
    r_.phase = Phase::kSetup;
    Flush(ctl_);  // now, not at the next poll: the guest is waiting for it
  }

  // kEvidence, answered (kGo, or the end of the session: nothing ran), then kStarted: the
  // program runs; the wall-time deadline starts now. A pooled VM's preparation expects kSetUp
  // alone (its spec has no program); anywhere else kSetUp is a violation.
  void WhileSettingUp(const Frame& f) {
    if (f.type == FrameType::kSetUp && c_.stop_when_set_up && !evidence_seen_) {
      r_.set_up = true;  // a pooled VM, set up: its request comes in a later session
      r_.phase = Phase::kDone;
      return;
    }
    if (f.type == FrameType::kEvidence && !evidence_seen_ && !c_.stop_when_set_up) {
      evidence_seen_ = true;
      if (c_.on_evidence && !c_.on_evidence(f.payload)) {
        r_.refused_by_evidence = true;
        r_.phase = Phase::kDone;
        return;
      }
      QueueFrame(FrameType::kGo, "");
      Flush(ctl_);
      return;
    }
    if (f.type != FrameType::kStarted || !evidence_seen_) return Unexpected(f);
    r_.t_started = Since();
    r_.phase = Phase::kRunning;
    deadline_ = Clock::now() + c_.wall_timeout;
    if (c_.on_started) c_.on_started();
  }

  // Output streams, capped here too (the agent caps first; more than the cap means it no longer
  // does what it should), and heartbeats, until the exit report.
  void WhileRunning(const Frame& f) {
    if (f.type == FrameType::kHeartbeat) return KeepHeartbeat(f);
    if (f.type == FrameType::kStdout || f.type == FrameType::kStderr) {
      uint64_t have = r_.stdout_data.size() + r_.stderr_data.size();
      uint64_t room = c_.output_cap > have ? c_.output_cap - have : 0;
      std::string& dst = f.type == FrameType::kStdout ? r_.stdout_data : r_.stderr_data;
      const size_t kept = static_cast<size_t>(std::min<uint64_t>(room, f.payload.size()));
      dst.append(f.payload, 0, kept);
      if (c_.on_output != nullptr && *c_.on_output && kept > 0) {
        (*c_.on_output)(f.type == FrameType::kStdout ? 0 : 1,
                        std::string_view(f.payload).substr(0, kept));
      }
      if (f.payload.size() > room) r_.output_cap_hit = true;
      return;
    }
    if (f.type != FrameType::kExit) return Unexpected(f);
    std::optional<ExitReport> e = DecodeExit(f.payload);
    if (!e) {
      r_.violation = "malformed exit report";
      return;
    }
    e->detail = Sanitize(e->detail, 1024);
    r_.exit = e;
    r_.t_exit = Since();
    r_.phase = Phase::kOutputs;
    deadline_ = Clock::now() + c_.collect_timeout;
  }

  // Kept for the record of a run that has to be killed (the first and the latest: how far the
  // guest clock moved against the host's). Diagnostics only: the guest is untrusted by now.
  void KeepHeartbeat(const Frame& f) {
    std::optional<microvm::Heartbeat> h = DecodeHeartbeat(f.payload);
    if (!h) {
      r_.violation = "malformed heartbeat";
      return;
    }
    h->program_state = Sanitize(h->program_state, kMaxHeartbeatState);
    HeartbeatSeen seen{*h, Since()};
    if (!r_.first_heartbeat) r_.first_heartbeat = seen;
    r_.last_heartbeat = seen;
    ++r_.heartbeats;
  }

  // Output files, one Begin/Data.../End at a time, into the receiver, until kOutputsDone.
  void WhileReturningOutputs(const Frame& f) {
    if (f.type == FrameType::kOutputsDone) {
      Decoder d(f.payload);
      uint64_t skipped = 0;
      if (!d.U64(&skipped) || !d.AtEnd()) {
        r_.violation = "malformed end of outputs";
        return;
      }
      if (c_.outputs != nullptr && c_.outputs->in_file()) {
        r_.violation = "outputs ended inside a file";
        return;
      }
      r_.outputs_skipped = skipped;
      r_.outputs_complete = true;
      r_.t_done = Since();
      r_.phase = Phase::kDone;
      return;
    }
    if (f.type != FrameType::kFileBegin && f.type != FrameType::kFileData &&
        f.type != FrameType::kFileEnd) {
      return Unexpected(f);
    }
    if (c_.outputs == nullptr) {
      r_.violation = "output files from a plan without output mounts";
      return;
    }
    Status st;
    if (f.type == FrameType::kFileBegin) {
      std::optional<FileHeader> h = DecodeFileHeader(f.payload);
      st = h ? c_.outputs->Begin(*h) : Status::DataLoss("malformed file header");
    } else if (f.type == FrameType::kFileData) {
      st = c_.outputs->Data(f.payload);
    } else {
      st = c_.outputs->End();
    }
    if (!st.ok()) r_.violation = st.message();
  }

  const SessionConfig& c_;
  int ctl_ = -1;
  int pidfd_ = -1;  // QEMU's (a pipe in the tests: no threads to read)
  Clock::time_point start_;
  Clock::time_point deadline_;
  FrameReader reader_;
  SessionResult r_;
  bool evidence_seen_ = false;  // kStarted is accepted only after kEvidence was answered
  // Session clock: the latest frame from the guest, the latest kNudge to it.
  std::chrono::nanoseconds last_heard_{0}, last_nudge_{0};
  std::string out_;
  size_t out_pos_ = 0;
  std::string console_;
  std::string stderr_;
  uint64_t frames_ = 0;
};

}  // namespace

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kBooting:
      return "booting";
    case Phase::kSetup:
      return "setting up";
    case Phase::kRunning:
      return "running";
    case Phase::kOutputs:
      return "sending outputs";
    case Phase::kDone:
      return "done";
  }
  return "unknown";
}

std::string Sanitize(std::string_view s, size_t max) {
  if (s.size() > max) s = s.substr(s.size() - max);
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    out.push_back((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t' ? ch : '?');
  }
  return out;
}

bool WaitingGuestHealthy(int ctl_fd, int console_fd, int stderr_fd, int vmm_pidfd) {
  pollfd fds[4] = {
      {vmm_pidfd, POLLIN, 0}, {ctl_fd, POLLIN, 0}, {console_fd, POLLIN, 0}, {stderr_fd, POLLIN, 0}};
  if (poll(fds, 4, 0) < 0) return errno == EINTR;
  if (fds[0].revents != 0 || fds[1].revents != 0) return false;
  char buf[4096];
  for (int i : {2, 3}) {
    if (fds[i].revents == 0) continue;
    // Bounded: a console that never stops talking is read again at the next check.
    SetNonBlocking(fds[i].fd);
    for (int k = 0; k < 64; ++k) {
      if (read(fds[i].fd, buf, sizeof buf) <= 0) break;
    }
  }
  return true;
}

SessionResult RunSession(int ctl_fd, int console_fd, int stderr_fd, int vmm_pidfd,
                         const SessionConfig& config) {
  return Session(config).Run(ctl_fd, console_fd, stderr_fd, vmm_pidfd);
}

}  // namespace safex::microvm
