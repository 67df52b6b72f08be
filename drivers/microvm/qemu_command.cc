#include "drivers/microvm/qemu_command.h"

#include "drivers/microvm/wire.h"

namespace safex::microvm {

const char* AccelName(Accel a) { return a == Accel::kKvm ? "kvm" : "tcg"; }

std::string KernelCommandLine(const VmConfig& c) {
  // quiet: the serial console is slow under TCG and only a diagnostic tail is kept.
  // panic=-1: a guest panic (e.g. the agent, PID 1, died) reboots, and -no-reboot ends QEMU.
  // pci=off: microvm has no PCI bus; skipping the probe saves boot time.
  // cryptomgr.notests: the crypto self-tests cost ~0.4 s of a TCG boot; they check the kernel's
  // own crypto code, not the isolation (measured: docs/microvm.md, "Boot time").
  std::string s = "console=ttyS0 quiet panic=-1 pci=off cryptomgr.notests";
  // tsc=reliable: under TCG the guest's TSC is the host's (real time at the given rate), and the
  // guest's only other clock is jiffies, whose ticks come late when the host is loaded. The
  // clocksource watchdog then took jiffies for the truth, marked the TSC unstable and switched
  // the guest to refined-jiffies: guest time ran at half speed, and its CPU accounting jumped
  // (a program charged 5.6 CPU-s in 0.12 s, killed at its CPU limit; another, stalled, met its
  // wall time). With the rate known and the watchdog off, the guest keeps the TSC.
  if (c.accel == Accel::kTcg && c.tsc_khz > 0) {
    s += " tsc_early_khz=" + std::to_string(c.tsc_khz) + " tsc=reliable";
  }
  if (c.probe) s += " safex.mode=probe";
  return s;
}

std::vector<std::string> BuildQemuArgv(const VmConfig& c) {
  std::vector<std::string> a = {c.qemu_path};
  auto add = [&a](std::initializer_list<std::string> items) {
    for (const std::string& s : items) a.push_back(s);
  };
  add({"-M", "microvm,x-option-roms=off"});
  if (c.accel == Accel::kKvm) {
    add({"-accel", "kvm", "-cpu", "host"});
  } else {
    // -erms: TCG emulates `rep stos`/`rep movs` one iteration at a time; without ERMS the guest
    // kernel (clear_page) and glibc (memset, memcpy) use loops that TCG translates into straight
    // code. Touching 256 MiB then takes a third of the CPU time (measured: docs/microvm.md).
    add({"-accel", "tcg,tb-size=" + std::to_string(c.tcg_tb_mib), "-cpu", "max,-erms"});
  }
  add({"-m", std::to_string(c.memory_mib) + "M", "-smp", std::to_string(c.vcpus)});
  add({"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-msg",
       "timestamp=off"});
  // Named threads ("CPU 0/TCG", "worker", ...): what the record of a silent guest shows of its
  // VMM (vmm_threads.h) says which thread was doing what.
  add({"-name", "safex,debug-threads=on"});
  if (c.qemu_sandbox) {
    // QEMU's seccomp filter: no obsolete syscalls, no privilege changes, no fork/exec, no
    // scheduler or resource tweaks. It runs unprivileged anyway (vm_launcher.cc).
    add({"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"});
  }
  add({"-kernel", c.kernel_path, "-initrd", c.initramfs_path, "-append", KernelCommandLine(c)});
  add({"-chardev", "socket,id=con,fd=" + std::to_string(c.console_fd), "-serial", "chardev:con"});
  add({"-device", "virtio-serial-device,max_ports=2", "-chardev",
       "socket,id=ctl,fd=" + std::to_string(c.ctl_fd), "-device",
       std::string("virtserialport,chardev=ctl,name=") + kPortName});
  for (size_t i = 0; i < c.disks.size(); ++i) {
    std::string set = std::to_string(i + 1);
    std::string id = "disk" + std::to_string(i);
    add({"-add-fd", "fd=" + std::to_string(c.disks[i].fd) + ",set=" + set, "-drive",
         "file=/dev/fdset/" + set + ",if=none,id=" + id + ",format=raw,readonly=on", "-device",
         "virtio-blk-device,drive=" + id + ",serial=" + c.disks[i].serial});
  }
  if (c.tap_fd) {
    add({"-netdev", "tap,id=net0,fd=" + std::to_string(*c.tap_fd), "-device",
         "virtio-net-device,netdev=net0" + (c.mac.empty() ? std::string() : ",mac=" + c.mac)});
  }
  return a;
}

}  // namespace safex::microvm
