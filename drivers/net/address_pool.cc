#include "drivers/net/address_pool.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "plan/address_class.h"

namespace safex::drivers::net {
namespace {

Status MkdirAll(const std::string& path, mode_t mode) {
  if (path.empty() || path[0] != '/') {
    return Status::InvalidArgument("state directory must be an absolute path: \"" + path + "\"");
  }
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    std::string prefix = path.substr(0, next);
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return Status::Errno("mkdir", prefix, errno);
    }
    pos = next + 1;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::Errno("stat", path, errno);
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(path + " is not a directory");
  return Status::Ok();
}

Result<std::string> ReadAll(int fd, const std::string& path) {
  std::string out;
  char buf[4096];
  off_t off = 0;
  while (out.size() < (64u << 10)) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("pread", path, errno);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return out;
}

Status WriteRecord(int fd, const std::string& text, const std::string& path) {
  if (::ftruncate(fd, 0) != 0) return Status::Errno("ftruncate", path, errno);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("pwrite", path, errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Opens and try-locks one slot file. Returns an invalid fd when another owner holds it.
Result<UniqueFd> TryLockSlot(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return Status::Errno("open", path, errno);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) return UniqueFd();
    return Status::Errno("flock", path, errno);
  }
  return fd;
}

}  // namespace

std::string Ipv4ToString(uint32_t addr) {
  struct in_addr a;
  a.s_addr = htonl(addr);
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return buf;
}

std::string SlotRecord::Serialize() const {
  std::ostringstream o;
  o << "safex-net-slot 1\n"
    << "run_id=" << run_id << "\n"
    << "pid=" << pid << "\n"
    << "netns_pin=" << netns_pin << "\n"
    << "uplink_netns=" << uplink_netns << "\n"
    << "host_veth=" << host_veth << "\n"
    << "nft_table=" << nft_table << "\n"
    << "end\n";
  return o.str();
}

bool SlotRecord::Parse(const std::string& text, SlotRecord* out) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != "safex-net-slot 1") return false;
  SlotRecord r;
  bool ended = false;
  while (std::getline(in, line)) {
    if (line == "end") {
      ended = true;
      break;
    }
    size_t eq = line.find('=');
    if (eq == std::string::npos) return false;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "run_id") {
      r.run_id = value;
    } else if (key == "pid") {
      r.pid = std::strtoll(value.c_str(), nullptr, 10);
    } else if (key == "netns_pin") {
      r.netns_pin = value;
    } else if (key == "uplink_netns") {
      r.uplink_netns = value;
    } else if (key == "host_veth") {
      r.host_veth = value;
    } else if (key == "nft_table") {
      r.nft_table = value;
    }
  }
  // A record without its end marker was cut short while being written, which happens before any
  // resource exists.
  if (!ended) return false;
  *out = std::move(r);
  return true;
}

Status SlotLease::Clear() {
  if (!fd_) return Status::Ok();
  if (::ftruncate(fd_.get(), 0) != 0) return Status::Errno("ftruncate", "address slot", errno);
  fd_.Reset();  // closing drops the flock
  return Status::Ok();
}

Result<AddressPool> AddressPool::Open(const std::string& pool_cidr, const std::string& state_dir,
                                      uint32_t max_slots) {
  auto cidr = plan::Cidr::Parse(pool_cidr);
  if (!cidr || cidr->base.family != AF_INET) {
    return Status::InvalidArgument("network pool \"" + pool_cidr +
                                   "\" is not an IPv4 CIDR with zero host bits (e.g. "
                                   "198.18.128.0/17)");
  }
  if (cidr->prefix < 8 || cidr->prefix > 30) {
    return Status::InvalidArgument("network pool \"" + pool_cidr +
                                   "\": prefix must be between /8 and /30 (one /30 per run)");
  }
  AddressPool p;
  const auto& b = cidr->base.bytes;
  p.base_ = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  p.prefix_ = cidr->prefix;
  uint64_t slots = (uint64_t{1} << (32 - cidr->prefix)) / 4;
  p.slots_ = static_cast<uint32_t>(std::min<uint64_t>(slots, max_slots));
  if (p.slots_ == 0) return Status::InvalidArgument("network pool has no slots (max_slots = 0)");
  p.dir_ = state_dir + "/leases";
  SAFEX_RETURN_IF_ERROR(MkdirAll(state_dir, 0700));
  SAFEX_RETURN_IF_ERROR(MkdirAll(p.dir_, 0700));
  return p;
}

std::string AddressPool::SlotPath(uint32_t index) const {
  // Named by the /30's address, not by its index in this pool: processes whose pools differ but
  // overlap still meet on the same file for the same addresses.
  return dir_ + "/" + Ipv4ToString(base_ + 4 * index);
}

bool AddressPool::Contains(uint32_t addr) const {
  uint32_t mask = prefix_ == 0 ? 0 : ~uint32_t{0} << (32 - prefix_);
  return (addr & mask) == base_;
}

Result<SlotLease> AddressPool::Acquire(const SlotRecord& record,
                                       const StaleCleaner& cleaner) const {
  std::string skipped;  // stale slots that could not be cleaned, for the exhaustion message
  for (uint32_t i = 0; i < slots_; ++i) {
    std::string path = SlotPath(i);
    SAFEX_ASSIGN_OR_RETURN(UniqueFd fd, TryLockSlot(path));
    if (!fd) continue;  // held by a live run
    SAFEX_ASSIGN_OR_RETURN(std::string old, ReadAll(fd.get(), path));
    SlotRecord stale;
    if (!old.empty() && SlotRecord::Parse(old, &stale)) {
      Status st = cleaner(stale);
      if (!st.ok()) {
        if (skipped.empty())
          skipped = "; stale slot " + std::to_string(i) + " kept: " + st.message();
        continue;
      }
    }
    SAFEX_RETURN_IF_ERROR(WriteRecord(fd.get(), record.Serialize(), path));
    SlotLease lease;
    lease.fd_ = std::move(fd);
    lease.index_ = i;
    lease.subnet_ = base_ + 4 * i;
    return lease;
  }
  return Status::ResourceExhausted("network address pool " + Ipv4ToString(base_) + "/" +
                                   std::to_string(prefix_) + " is exhausted (" +
                                   std::to_string(slots_) + " concurrent runs)" + skipped);
}

Status AddressPool::CleanStale(const StaleCleaner& cleaner, int* cleaned) const {
  Status first;
  int n = 0;
  for (uint32_t i = 0; i < slots_; ++i) {
    std::string path = SlotPath(i);
    if (::access(path.c_str(), F_OK) != 0) continue;
    auto fd = TryLockSlot(path);
    if (!fd.ok()) {
      if (first.ok()) first = fd.status();
      continue;
    }
    if (!*fd) continue;
    auto text = ReadAll(fd->get(), path);
    if (!text.ok()) {
      if (first.ok()) first = text.status();
      continue;
    }
    if (text->empty()) continue;
    SlotRecord stale;
    if (SlotRecord::Parse(*text, &stale)) {
      Status st = cleaner(stale);
      if (!st.ok()) {
        if (first.ok()) first = st.With("slot " + std::to_string(i));
        continue;
      }
      ++n;
    }
    if (::ftruncate(fd->get(), 0) != 0 && first.ok())
      first = Status::Errno("ftruncate", path, errno);
  }
  if (cleaned) *cleaned = n;
  return first;
}

Result<int> AddressPool::CountRecords() const {
  int n = 0;
  for (uint32_t i = 0; i < slots_; ++i) {
    std::string path = SlotPath(i);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      return Status::Errno("stat", path, errno);
    }
    if (st.st_size > 0) ++n;
  }
  return n;
}

}  // namespace safex::drivers::net
