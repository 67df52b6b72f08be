#include "drivers/gvisor/runsc_version_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/sha256.h"
#include "common/unique_fd.h"

namespace safex::drivers::gvisor {
namespace {

constexpr size_t kMaxCacheBytes = 4096;
// Version 2 added the binary's SHA-256: a cache of version 1 is a miss (one re-ask per host).
constexpr const char* kMagic = "safex-runsc-version 2";
constexpr const char* kShaPrefix = "sha256 ";
constexpr size_t kShaHexLen = 64;

bool IsLowerHex(const std::string& s) {
  return s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

std::string RunscIdentity(const struct stat& st) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s dev=%llu ino=%llu size=%lld mtime=%lld.%09ld ctime=%lld.%09ld",
           kMagic, static_cast<unsigned long long>(st.st_dev),
           static_cast<unsigned long long>(st.st_ino), static_cast<long long>(st.st_size),
           static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec,
           static_cast<long long>(st.st_ctim.tv_sec), st.st_ctim.tv_nsec);
  return buf;
}

// The file: the identity line, `sha256 <64 hex>`, then the version output as runsc printed it.
std::optional<RunscFacts> ReadRunscVersionCache(const std::string& cache_path,
                                                const struct stat& st) {
  UniqueFd fd(open(cache_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  struct stat cs;
  // Only a regular file of root's, writable by nobody else, is believed.
  if (fstat(fd.get(), &cs) != 0 || !S_ISREG(cs.st_mode) || cs.st_uid != geteuid() ||
      (cs.st_mode & 022) != 0 || cs.st_size <= 0 ||
      static_cast<size_t>(cs.st_size) > kMaxCacheBytes) {
    return std::nullopt;
  }
  std::string text(static_cast<size_t>(cs.st_size), '\0');
  ssize_t n = pread(fd.get(), text.data(), text.size(), 0);
  if (n != cs.st_size) return std::nullopt;
  const std::string want = RunscIdentity(st) + "\n" + kShaPrefix;
  const size_t sha_at = want.size();
  if (text.compare(0, want.size(), want) != 0 || text.size() < sha_at + kShaHexLen + 1 ||
      text[sha_at + kShaHexLen] != '\n') {
    return std::nullopt;
  }
  RunscFacts facts;
  facts.sha256 = text.substr(sha_at, kShaHexLen);
  if (!IsLowerHex(facts.sha256)) return std::nullopt;
  facts.version_output = text.substr(sha_at + kShaHexLen + 1);
  return facts;
}

void WriteRunscVersionCache(const std::string& cache_path, const struct stat& st,
                            const RunscFacts& facts) {
  if (facts.sha256.size() != kShaHexLen || !IsLowerHex(facts.sha256)) return;
  std::string text =
      RunscIdentity(st) + "\n" + kShaPrefix + facts.sha256 + "\n" + facts.version_output;
  if (text.size() > kMaxCacheBytes) return;
  const std::string tmp = cache_path + ".tmp." + std::to_string(getpid());
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return;
  bool ok = write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  fd.Reset();
  if (!ok || rename(tmp.c_str(), cache_path.c_str()) != 0) unlink(tmp.c_str());
}

// The path names root's own runtime (host config); it is opened read-only and only hashed, and the
// identity of what was read is compared with the one the caller keys the cache by.
Result<std::string> HashRunsc(const std::string& path, const struct stat& st) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return Status::Unavailable("gvisor: cannot read " + path + ": " + strerror(errno));
  }
  struct stat before;
  if (fstat(fd.get(), &before) != 0 || RunscIdentity(before) != RunscIdentity(st)) {
    return Status::Unavailable("gvisor: " + path + " changed while it was probed");
  }
  Result<std::string> sha256 = Sha256HexOfFd(fd.get());
  if (!sha256.ok()) {
    return Status::Unavailable("gvisor: cannot read " + path + ": " + sha256.status().message());
  }
  struct stat after;
  if (fstat(fd.get(), &after) != 0 || RunscIdentity(after) != RunscIdentity(st)) {
    return Status::Unavailable("gvisor: " + path + " changed while it was hashed");
  }
  return *sha256;
}

}  // namespace safex::drivers::gvisor
