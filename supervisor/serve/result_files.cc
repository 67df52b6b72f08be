#include "supervisor/serve/result_files.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>

#include "common/fs_tree.h"
#include "common/sha256.h"
#include "common/utf8.h"

namespace safex::serve {
namespace {

bool PrintableUtf8(std::string_view s) {
  if (!IsValidUtf8(s)) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// Depth-first, fd-relative, O_NOFOLLOW at every step: a symlink is neither followed nor listed.
Status Walk(int dirfd, const std::string& prefix, int depth, ResultFileList* out) {
  if (depth > 64) return Status::ResourceExhausted("output files nested deeper than 64");
  SAFEX_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectoryAt(dirfd));
  for (const std::string& n : names) {
    UniqueFd fd(openat(dirfd, n.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd) continue;  // a symlink (ELOOP) or gone: not ours to list
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) return Status::Errno("fstat", n, errno);
    const std::string name = prefix.empty() ? n : prefix + "/" + n;
    if (S_ISDIR(st.st_mode)) {
      SAFEX_RETURN_IF_ERROR(Walk(fd.get(), name, depth + 1, out));
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    if (!PrintableUtf8(name)) {
      ++out->unlisted;
      continue;
    }
    ResultFile f;
    f.name = name;
    SAFEX_ASSIGN_OR_RETURN(f.sha256, Sha256HexOfFd(fd.get(), &f.size));
    out->total_bytes += f.size;
    out->files.push_back(std::move(f));
  }
  return Status::Ok();
}

}  // namespace

Result<ResultFileList> ListResultFiles(const std::string& dir) {
  ResultFileList out;
  UniqueFd root(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) return Status::Errno("open", dir, errno);
  SAFEX_RETURN_IF_ERROR(Walk(root.get(), "", 0, &out));
  return out;
}

bool ValidResultFileName(std::string_view name) {
  if (name.empty() || name.size() > 4096 || name.front() == '/' || !PrintableUtf8(name)) {
    return false;
  }
  size_t start = 0;
  for (;;) {
    const size_t end = name.find('/', start);
    const std::string_view part =
        name.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

Result<std::string> PercentDecode(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) {
      return Status::InvalidArgument("a '%' escape is cut short");
    }
    const int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
    if (hi < 0 || lo < 0) return Status::InvalidArgument("a '%' escape is not two hex digits");
    const char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0') return Status::InvalidArgument("the name holds a NUL byte");
    out.push_back(c);
    i += 2;
  }
  return out;
}

Result<UniqueFd> OpenResultFile(const std::string& dir, const std::string& name) {
  if (!ValidResultFileName(name)) return Status::InvalidArgument("not a valid file name");
  UniqueFd root(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) return Status::Errno("open", dir, errno);
  open_how how{};
  how.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  const long fd = syscall(SYS_openat2, root.get(), name.c_str(), &how, sizeof(how));
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("no such file");
    return Status::Errno("openat2", name, errno);
  }
  UniqueFd file(static_cast<int>(fd));
  struct stat st {};
  if (fstat(file.get(), &st) != 0) return Status::Errno("fstat", name, errno);
  if (!S_ISREG(st.st_mode)) return Status::FailedPrecondition("not a regular file");
  return file;
}

}  // namespace safex::serve
