#include "drivers/microvm/kvm_probe.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/unique_fd.h"
#include "drivers/driver.h"

namespace safex::microvm {
namespace {

std::string CacheKey(const LaunchSpec& s) {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  std::ostringstream k;
  // v2: the files named by drivers::PathIdentity, as the pool's generation names them (v1 had
  // its own format: a cache of v1 is a miss, one probe boot per host).
  k << "v2 " << (boot_id.empty() ? "noboot" : boot_id) << " "
    << drivers::PathIdentity(s.vm.qemu_path, true) << drivers::PathIdentity(s.vm.kernel_path, true)
    << drivers::PathIdentity(s.vm.initramfs_path, true) << drivers::PathIdentity("/dev/kvm", true)
    << s.uid << ":" << s.gid;
  return k.str();
}

bool ReadCache(const std::string& file, const std::string& key, KvmProbeResult* out) {
  std::ifstream in(file);
  std::string line_key, verdict, detail;
  long long boot_ns = 0;
  if (!std::getline(in, line_key) || line_key != key) return false;
  if (!(in >> verdict >> boot_ns)) return false;
  in.get();
  std::getline(in, detail);
  if (verdict != "usable" && verdict != "unusable") return false;
  out->usable = verdict == "usable";
  out->boot_time = std::chrono::nanoseconds(boot_ns);
  out->detail = detail + " (cached)";
  out->from_cache = true;
  return true;
}

void WriteCache(const std::string& file, const std::string& key, const KvmProbeResult& r) {
  std::string tmp = file + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << key << "\n"
        << (r.usable ? "usable" : "unusable") << " " << r.boot_time.count() << "\n"
        << r.detail << "\n";
    if (!out) return;
  }
  if (rename(tmp.c_str(), file.c_str()) != 0) unlink(tmp.c_str());
}

}  // namespace

KvmProbeResult ProbeKvm(const LaunchSpec& base, std::chrono::milliseconds timeout,
                        const std::string& cache_file) {
  KvmProbeResult r;
  UniqueFd kvm(open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (!kvm) {
    r.detail = std::string("cannot open /dev/kvm: ") + std::strerror(errno);
    return r;
  }
  int api = ioctl(kvm.get(), KVM_GET_API_VERSION, 0);
  if (api != KVM_API_VERSION) {
    r.detail = "/dev/kvm answers API version " + std::to_string(api);
    return r;
  }
  kvm.Reset();

  std::string key = CacheKey(base);
  if (!cache_file.empty() && ReadCache(cache_file, key, &r)) return r;

  LaunchSpec spec = base;
  spec.vm.accel = Accel::kKvm;
  spec.vm.probe = true;
  spec.vm.memory_mib = 256;
  spec.vm.vcpus = 1;
  spec.vm.disks.clear();
  spec.disk_fds.clear();
  spec.vm.tap_fd.reset();
  spec.tap_fd.reset();
  SessionConfig sc;
  sc.boot_timeout = timeout;
  Result<LaunchResult> lr = LaunchAndRun(spec, sc);
  if (!lr.ok()) {
    // QEMU could not even start: not a property of KVM worth caching.
    r.detail = "starting the KVM probe failed: " + lr.status().message();
    return r;
  }
  const SessionResult& s = lr->session;
  if (s.hello && s.violation.empty()) {
    r.usable = true;
    r.boot_time = s.t_hello;
    r.detail = "KVM guest booted in " + std::to_string(s.t_hello.count() / 1000000) + " ms";
  } else if (s.timed_out) {
    r.detail = "a KVM guest did not boot within " + std::to_string(timeout.count()) +
               " ms (nested virtualisation unusable?); the probe VM was killed";
  } else {
    r.detail = "the KVM probe VM ended without booting";
    if (!s.vmm_stderr.empty()) r.detail += ": " + s.vmm_stderr.substr(0, 300);
    if (!s.violation.empty()) r.detail += ": " + s.violation;
  }
  // Strip newlines: the detail is one line in the cache and in messages.
  for (char& c : r.detail) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (!cache_file.empty()) WriteCache(cache_file, key, r);
  return r;
}

}  // namespace safex::microvm
