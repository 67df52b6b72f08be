#include "drivers/gvisor/runsc_version_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "common/unique_fd.h"

namespace safex::drivers::gvisor {
namespace {

constexpr size_t kMaxCacheBytes = 4096;
constexpr const char* kMagic = "safex-runsc-version 1";

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

std::optional<std::string> ReadRunscVersionCache(const std::string& cache_path,
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
  const std::string want = RunscIdentity(st) + "\n";
  if (text.compare(0, want.size(), want) != 0) return std::nullopt;
  return text.substr(want.size());
}

void WriteRunscVersionCache(const std::string& cache_path, const struct stat& st,
                            const std::string& version_output) {
  std::string text = RunscIdentity(st) + "\n" + version_output;
  if (text.size() > kMaxCacheBytes) return;
  const std::string tmp = cache_path + ".tmp." + std::to_string(getpid());
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return;
  bool ok = write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  fd.Reset();
  if (!ok || rename(tmp.c_str(), cache_path.c_str()) != 0) unlink(tmp.c_str());
}

}  // namespace safex::drivers::gvisor
