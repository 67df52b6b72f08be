#include "tests/fleet/pg_cluster.h"

#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "fleet/pg.h"

namespace safex::testing {
namespace {

// The newest installed server's binaries (/usr/lib/postgresql/N/bin), or "".
std::string ServerBinDir() {
  glob_t g{};
  std::string best;
  if (glob("/usr/lib/postgresql/*/bin/initdb", 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) best = g.gl_pathv[i];  // glob sorts: last is newest
  }
  globfree(&g);
  return best.empty() ? "" : best.substr(0, best.size() - std::string("/initdb").size());
}

// Forks and execs argv as the postgres user when root (as ourselves otherwise), output to `log`.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  const passwd* pw = geteuid() == 0 ? getpwnam("postgres") : nullptr;
  if (geteuid() == 0 && pw == nullptr) return -1;
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
  }
  if (pw != nullptr &&
      (setgroups(0, nullptr) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)) {
    _exit(126);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

int WaitFor(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

std::unique_ptr<PrivateCluster> PrivateCluster::Start(std::string* why) {
  std::unique_ptr<PrivateCluster> c(new PrivateCluster());
  c->bindir_ = ServerBinDir();
  if (c->bindir_.empty()) {
    *why = "PostgreSQL's server is not installed (/usr/lib/postgresql/*/bin/initdb)";
    return nullptr;
  }
  char tmpl[] = "/tmp/sxtest-pg-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    *why = "mkdtemp failed";
    return nullptr;
  }
  c->dir_ = tmpl;
  if (const passwd* pw = geteuid() == 0 ? getpwnam("postgres") : nullptr) {
    if (chown(c->dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) *why = "chown failed";
  }
  c->port_ = 50000 + static_cast<int>(getpid() % 10000);
  const std::string log = c->dir_ + "/server.log";
  const pid_t init = Spawn({c->bindir_ + "/initdb", "-D", c->dir_ + "/data", "--auth=trust", "-U",
                            "postgres", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"},
                           log);
  if (init < 0 || WaitFor(init) != 0) {
    *why = "initdb failed (see " + log + ")";
    return nullptr;
  }
  // fsync off: a test cluster's durability is not under test (the shipper's transactions are).
  c->server_ = Spawn({c->bindir_ + "/postgres", "-D", c->dir_ + "/data", "-k", c->dir_, "-p",
                      std::to_string(c->port_), "-c", "listen_addresses=", "-c", "fsync=off", "-c",
                      "max_connections=50"},
                     log);
  for (int i = 0; i < 300; ++i) {
    if (fleet::internal::PgConn::Connect(c->Url()).ok()) return c;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  *why = "the server did not accept connections in 30 s (see " + log + ")";
  return nullptr;
}

PrivateCluster::~PrivateCluster() {
  if (server_ > 0) {
    kill(server_, SIGINT);  // fast shutdown: ends the sessions, then the server
    for (int i = 0; i < 300; ++i) {
      if (waitpid(server_, nullptr, WNOHANG) == server_) {
        server_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (server_ > 0) {
      kill(server_, SIGKILL);
      WaitFor(server_);
    }
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string PrivateCluster::Url(const std::string& db, const std::string& user) const {
  return "host=" + dir_ + " port=" + std::to_string(port_) + " dbname=" + db + " user=" + user;
}

std::string PrivateCluster::Sql(const std::string& sql, const std::string& db) const {
  auto conn = fleet::internal::PgConn::Connect(Url(db));
  if (!conn.ok()) return conn.status().message();
  Status st = (*conn)->Run(sql);
  return st.ok() ? "" : st.message();
}

std::string PrivateCluster::NewDatabase(const std::string& name) const {
  const std::string err = Sql("CREATE DATABASE " + name);
  return err.empty() ? Url(name) : "";
}

}  // namespace safex::testing
