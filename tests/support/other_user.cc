#include "tests/support/other_user.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

namespace safex::testing {
namespace {

// Child side: one line per finding ("R path", "N path", "L path") on fd `out`.
void Walk(const std::string& dir, const std::string& needle, int out, size_t* budget) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::string line = "L " + dir + "\n";
  (void)!write(out, line.data(), line.size());
  while (dirent* e = readdir(d)) {
    if (*budget == 0) break;
    --*budget;
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = dir + "/" + name;
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      Walk(path, needle, out, budget);
    } else if (S_ISREG(st.st_mode)) {
      int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) continue;
      std::string data;
      char buf[65536];
      ssize_t n;
      while (data.size() < (16u << 20) && (n = read(fd, buf, sizeof buf)) > 0) data.append(buf, n);
      close(fd);
      line = "R " + path + "\n";
      (void)!write(out, line.data(), line.size());
      if (!needle.empty() && data.find(needle) != std::string::npos) {
        line = "N " + path + "\n";
        (void)!write(out, line.data(), line.size());
      }
    }
  }
  closedir(d);
}

}  // namespace

OtherUserView ViewAs(uid_t uid, gid_t gid, const std::string& root, const std::string& needle,
                     size_t max_entries) {
  OtherUserView view;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return view;
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return view;
  }
  if (pid == 0) {
    close(p[0]);
    if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      _exit(3);
    }
    (void)!write(p[1], "OK\n", 3);
    size_t budget = max_entries;
    Walk(root, needle, p[1], &budget);
    _exit(0);
  }
  close(p[1]);
  std::string text;
  char buf[4096];
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    pollfd pfd{p[0], POLLIN, 0};
    if (poll(&pfd, 1, 100) > 0) {
      ssize_t n = read(p[0], buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      break;
    }
  }
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line == "OK") {
      view.ran = true;
    } else if (line.starts_with("R ")) {
      view.readable.push_back(line.substr(2));
    } else if (line.starts_with("N ")) {
      view.with_needle.push_back(line.substr(2));
    } else if (line.starts_with("L ")) {
      view.listable.push_back(line.substr(2));
    }
  }
  return view;
}

}  // namespace safex::testing
