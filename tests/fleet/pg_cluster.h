// A private PostgreSQL cluster for a test: initdb in a temp dir, the server listening on a Unix
// socket in that dir only (no TCP), on its own port; stopped and removed with the object. As
// root, the server runs as the `postgres` user (initdb refuses root).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

namespace safex::testing {

class PrivateCluster {
 public:
  // nullptr, with *why, when PostgreSQL's binaries are missing or the server does not start.
  static std::unique_ptr<PrivateCluster> Start(std::string* why);
  ~PrivateCluster();
  PrivateCluster(const PrivateCluster&) = delete;
  PrivateCluster& operator=(const PrivateCluster&) = delete;

  // A libpq connection string to database `db` as role `user`.
  std::string Url(const std::string& db = "postgres", const std::string& user = "postgres") const;
  // Runs `sql` as the superuser on `db`; "" on success, else the server's message.
  std::string Sql(const std::string& sql, const std::string& db = "postgres") const;
  // A fresh database owned by the superuser; returns its Url().
  std::string NewDatabase(const std::string& name) const;

 private:
  PrivateCluster() = default;
  std::string dir_;
  std::string bindir_;
  int port_ = 0;
  pid_t server_ = -1;
};

}  // namespace safex::testing
