// safex-guest-agent: /init of the microVM's initramfs (PID 1 of a disposable guest kernel).
//
// One linear run per boot; every step's failure is reported to the host (kSetupError) and the
// guest powers off. The order matters:
//   1. /dev, /proc, /sys; stdio on the console       (nothing else works before)
//   2. kernel modules (virtio, console, blk, erofs)  (the channel and disks need them)
//   3. the channel; kHello                           (the host's boot deadline ends here)
//   4. the spec (and stdin) from the host
//   5. the agent moves onto its own tmpfs root      (so the workload can pivot_root away from it)
//   6. network, cgroup, the workload's root, the seccomp program  (all before the clone)
//   6b. a pooled VM's spec has no program yet (request_later): kSetUp, then the request (argv,
//       stdin) when a run is handed the VM; until then the agent waits, and nothing of any
//       request is in the VM
//   7. the workload runs; output streamed; in-guest limits enforced; kExit
//   8. output mounts sent; kOutputsDone; wait       (the host kills the VMM once it has it all)
// With `safex.mode=probe` on the kernel command line, the agent stops after kHello: the host uses
// that boot to learn whether KVM works and how long a boot takes.
#include <fcntl.h>
#include <sys/reboot.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "common/small_file.h"
#include "drivers/microvm/guest_spec.h"
#include "drivers/microvm/wire.h"
#include "guest/channel.h"
#include "guest/guest_root.h"
#include "guest/modules.h"
#include "guest/net_setup.h"
#include "guest/output_sender.h"
#include "guest/seccomp_filter.h"
#include "guest/util.h"
#include "guest/workload.h"
#include "guest/workload_cgroup.h"

namespace safex::guest {
namespace {

using microvm::FrameType;
using std::chrono::milliseconds;

// Stdin the host may send; the host bounds it far lower (see MicrovmOptions).
constexpr size_t kMaxStdin = 256u * 1024 * 1024;

[[noreturn]] void PowerOff() {
  sync();
  reboot(RB_POWER_OFF);
  // Not reached on success; if it fails, exiting PID 1 panics the kernel, and panic=-1 with
  // QEMU's -no-reboot ends the VM just the same.
  _exit(1);
}

// The kernel starts /init without fds when the initramfs has no /dev/console node.
void SetupStdio() {
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  int con = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    int src = fd == 0 ? null_fd : (con >= 0 ? con : null_fd);
    if (src >= 0 && src != fd) dup2(src, fd);
  }
  if (null_fd > 2) close(null_fd);
  if (con > 2) close(con);
}

bool ProbeMode() {
  const std::optional<std::string> cmdline = ReadSmallFile("/proc/cmdline");
  if (!cmdline) return false;
  std::string_view rest = TrimNewline(*cmdline);
  while (!rest.empty()) {
    size_t sp = rest.find(' ');
    if (rest.substr(0, sp) == "safex.mode=probe") return true;
    if (sp == std::string_view::npos) break;
    rest.remove_prefix(sp + 1);
  }
  return false;
}

// After the agent's last frame: QEMU may still hold some of it in its own buffers (a write to the
// port completes when QEMU has taken the data, not when the host has read it), and powering off
// now would lose it. The host kills the VM once it has everything; until then, wait. A closed
// channel means the host is gone: power off. Frames read here are dropped: the only ones the host
// sends after kGo are kNudge, whose interrupt was its whole purpose (drivers/microvm/vm_session.h).
[[noreturn]] void WaitForHostThenPowerOff(Channel& ch) {
  while (ch.Receive(microvm::kMaxSpecFrame)) {
  }
  PowerOff();
}

[[noreturn]] void FailSetup(Channel& ch, const std::string& msg) {
  Log(msg);
  ch.Send(FrameType::kSetupError, msg.substr(0, 4000));
  WaitForHostThenPowerOff(ch);
}

// kStdinData frames up to kStdinEnd, when the spec (or the request) said stdin follows.
std::string ReceiveStdin(Channel& ch) {
  std::string stdin_data;
  for (;;) {
    std::optional<microvm::Frame> f = ch.Receive(microvm::kMaxDataFrame);
    if (!f) FailSetup(ch, "channel closed while receiving stdin");
    if (f->type == FrameType::kStdinEnd) return stdin_data;
    if (f->type != FrameType::kStdinData || stdin_data.size() + f->payload.size() > kMaxStdin) {
      FailSetup(ch, "bad stdin frame");
    }
    stdin_data += f->payload;
  }
}

// A pooled VM, set up from its spec: says so, then waits for the request of the run it is handed
// to, and puts its argv and stdin into the spec.
void AwaitRequest(Channel& ch, microvm::GuestSpec* spec, std::string* stdin_data) {
  if (!ch.Send(FrameType::kSetUp, "")) PowerOff();
  std::optional<microvm::Frame> f = ch.Receive(microvm::kMaxSpecFrame);
  if (!f || f->type != FrameType::kRequest) FailSetup(ch, "expected the run request");
  std::optional<microvm::GuestRequest> request = microvm::DecodeRequest(f->payload);
  if (!request) FailSetup(ch, "malformed run request");
  spec->argv = std::move(request->argv);
  spec->has_stdin = request->has_stdin;
  if (spec->has_stdin) *stdin_data = ReceiveStdin(ch);
}

int Main() {
  std::string early = MountEarly();
  SetupStdio();
  if (getpid() != 1) {
    std::fprintf(stderr, "safex-guest-agent: must run as PID 1 of a safex microVM\n");
    return 2;
  }
  if (!early.empty()) {
    Log(early);
    PowerOff();
  }
  uint64_t agent_start = BootTimeNs();
  // Transparent huge pages: the kernel turns them off on machines under 512 MiB of RAM, which a
  // microVM sized to its plan usually is, and each 4 KiB page fault is expensive under TCG:
  // touching 256 MiB cost about 4 s of CPU time there, so a program racing to its memory limit
  // met its CPU limit first. With them on, anonymous memory faults in 2 MiB at a time (the
  // memory cgroup still charges every byte; at memory.max the kernel falls back to small pages).
  // Best effort: a kernel without THP runs as before.
  (void)WriteControl("/sys/kernel/mm/transparent_hugepage/enabled", "always");
  std::string modules_error = LoadModules("/lib/modules/safex");
  std::string open_error;
  std::optional<Channel> ch = Channel::Open(milliseconds(10000), &open_error);
  if (!ch) {
    Log(modules_error.empty() ? open_error : modules_error);
    PowerOff();
  }
  if (!modules_error.empty()) FailSetup(*ch, modules_error);

  utsname u{};
  uname(&u);
  microvm::Hello hello{microvm::kProtocolVersion, u.release, agent_start,
                       BootTimeNs() - agent_start};
  if (!ch->Send(FrameType::kHello, microvm::EncodeHello(hello))) PowerOff();
  if (ProbeMode()) WaitForHostThenPowerOff(*ch);

  std::optional<microvm::Frame> f = ch->Receive(microvm::kMaxSpecFrame);
  if (!f || f->type != FrameType::kSpec) FailSetup(*ch, "expected the run spec");
  std::optional<microvm::GuestSpec> spec = microvm::DecodeSpec(f->payload);
  if (!spec) FailSetup(*ch, "malformed run spec");
  std::string stdin_data;
  if (spec->has_stdin) stdin_data = ReceiveStdin(*ch);

  if (std::string e = SwitchAgentRoot(); !e.empty()) FailSetup(*ch, e);
  if (std::string e = BringUpLoopback(); !e.empty()) FailSetup(*ch, e);
  if (spec->network) {
    if (std::string e = ConfigureEthernet(*spec->network); !e.empty()) FailSetup(*ch, e);
  }
  std::string error;
  std::optional<WorkloadCgroup> cgroup = WorkloadCgroup::Create(*spec, &error);
  if (!cgroup) FailSetup(*ch, error);
  if (std::string e = BuildWorkloadRoot(*spec, milliseconds(5000)); !e.empty()) FailSetup(*ch, e);
  auto program = BuildSeccompProgram(*spec, &error);
  if (!program) FailSetup(*ch, error);
  if (spec->request_later) AwaitRequest(*ch, &*spec, &stdin_data);

  // The host sees what the program will get before it starts (kEvidence) and answers kGo, or
  // ends the VM: the child never execs without it.
  auto approve = [&ch](const std::string& report) {
    if (!ch->Send(FrameType::kEvidence, report)) return false;
    std::optional<microvm::Frame> answer = ch->Receive(microvm::kMaxControlFrame);
    return answer && answer->type == FrameType::kGo;
  };
  SpawnOutcome spawn = SpawnWorkload(*spec, *program, *cgroup, approve);
  if (!spawn.setup_error.empty()) FailSetup(*ch, spawn.setup_error);
  ch->Send(FrameType::kStarted, "");
  microvm::ExitReport report;
  if (spawn.exec_failure) {
    report = *spawn.exec_failure;
  } else {
    report = Supervise(*spawn.spawned, *spec, *cgroup, *ch, stdin_data);
  }
  if (!ch->Send(FrameType::kExit, microvm::EncodeExit(report))) PowerOff();

  uint64_t skipped = 0;
  if (SendOutputs(*spec, *ch, &skipped)) {
    microvm::Encoder e;
    e.U64(skipped);
    ch->Send(FrameType::kOutputsDone, e.bytes());
  }
  WaitForHostThenPowerOff(*ch);
}

}  // namespace
}  // namespace safex::guest

int main() { return safex::guest::Main(); }
