#include "drivers/native/landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace safex::drivers::native {
namespace {

// ABI 3 (Linux 6.2): truncate(2) and ftruncate on files opened for writing. This system's
// headers stop at ABI 2; the value is the kernel's stable ABI.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

constexpr uint64_t kRead = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
constexpr uint64_t kExecute = LANDLOCK_ACCESS_FS_EXECUTE;
constexpr uint64_t kWriteAbi1 = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                                LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR |
                                LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
                                LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM;

constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE;

// Every file-system right of an ABI version (what the ruleset handles, so denies unless granted).
uint64_t HandledBy(int abi) {
  uint64_t all =
      kRead | kExecute | kWriteAbi1 | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK;
  if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) all |= LANDLOCK_ACCESS_FS_TRUNCATE;
  return all;
}

uint64_t WriteRights(int abi) {
  uint64_t w = kWriteAbi1;
  if (abi >= 2) w |= LANDLOCK_ACCESS_FS_REFER;  // rename and link inside the mount
  if (abi >= 3) w |= LANDLOCK_ACCESS_FS_TRUNCATE;
  return w;
}

bool Writable(const plan::Mount& m) {
  return m.kind == plan::MountKind::kTmpfs || m.kind == plan::MountKind::kOutput ||
         (m.kind == plan::MountKind::kBind && !m.read_only);
}

}  // namespace

int LandlockAbi() {
  const long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v > 0 ? static_cast<int>(v) : 0;
}

LandlockRuleset LandlockRulesFor(const plan::Plan& plan, int abi) {
  LandlockRuleset r;
  if (abi <= 0) return r;
  r.abi = abi;
  r.handled = HandledBy(abi);
  // Everything in the root can be read: the root holds only what the plan mounts.
  r.rules.push_back({"/", kRead});
  // /dev's nodes (null, zero, full, random, urandom) are written to; /dev/shm is scratch.
  r.rules.push_back({"/dev", LANDLOCK_ACCESS_FS_WRITE_FILE});
  r.rules.push_back({"/dev/shm", WriteRights(abi)});
  for (const plan::Mount& m : plan.mounts) {
    uint64_t access = 0;
    if (!m.noexec) access |= kExecute;
    if (Writable(m)) access |= WriteRights(abi);
    if (access != 0) r.rules.push_back({m.target, access});
  }
  return r;
}

std::string DescribeRuleset(const LandlockRuleset& r) {
  if (r.abi == 0) return "none";
  std::string out = "abi " + std::to_string(r.abi) + ":";
  for (const LandlockRule& rule : r.rules) {
    std::string rights;
    if ((rule.access & kRead) != 0) rights += "read,";
    if ((rule.access & kExecute) != 0) rights += "execute,";
    if ((rule.access & LANDLOCK_ACCESS_FS_MAKE_REG) != 0) {
      rights += "write,";
    } else if ((rule.access & LANDLOCK_ACCESS_FS_WRITE_FILE) != 0) {
      rights += "write-existing,";
    }
    if (!rights.empty()) rights.pop_back();
    out += " " + rule.path + "=" + rights;
  }
  return out;
}

int ApplyLandlock(int abi, uint64_t handled, const LandlockRule* rules, size_t n,
                  int* failed_rule) {
  *failed_rule = -1;
  if (abi <= 0) return 0;
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = handled;
  const int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (ruleset < 0) return errno;
  for (size_t i = 0; i < n; ++i) {
    const int fd = open(rules[i].path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      close(ruleset);
      *failed_rule = static_cast<int>(i);
      return err;
    }
    // A bind of a single file takes only the rights that apply to files (the kernel refuses
    // directory rights on a file with EINVAL).
    struct stat st;
    uint64_t access = rules[i].access;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) access &= kFileRights;
    landlock_path_beneath_attr pb{};
    pb.allowed_access = access;
    pb.parent_fd = fd;
    const long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    const int err = errno;
    close(fd);
    if (rc != 0) {
      close(ruleset);
      *failed_rule = static_cast<int>(i);
      return err;
    }
  }
  const long rc = syscall(SYS_landlock_restrict_self, ruleset, 0);
  const int err = errno;
  close(ruleset);
  return rc == 0 ? 0 : err;
}

}  // namespace safex::drivers::native
