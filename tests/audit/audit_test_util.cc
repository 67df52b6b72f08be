#include "tests/audit/audit_test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "audit/canonical.h"
#include "common/unique_fd.h"

namespace safex::audit::testing {

TempDir::TempDir() {
  char tmpl[] = "/var/tmp/safex-audit-test.XXXXXX";
  char* p = mkdtemp(tmpl);
  if (p == nullptr) abort();
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  // Restore permissions tests may have taken away, so the removal cannot fail.
  for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
  }
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ec);
  std::filesystem::remove_all(path_, ec);
}

RunStart SampleStart(const std::string& run_id, const std::string& policy) {
  RunStart s;
  s.run_id = run_id;
  s.requester = {1000, 1000, 4242};
  s.policy_name = policy;
  s.policy_source_digest = std::string(64, 'a');
  s.plan_digest = std::string(64, 'b');
  s.backend = "gvisor";
  s.backend_mode = "systrap";
  s.argv = {"python3", "-c", "print('hi')"};
  return s;
}

RunEnd SampleEnd(const std::string& run_id, Verdict verdict) {
  RunEnd e;
  e.run_id = run_id;
  e.exit_code = verdict == Verdict::kOk ? 0 : 1;
  e.verdict = verdict;
  if (verdict == Verdict::kMemoryLimit) {
    e.exit_code.reset();
    e.signal = 9;
    e.limits_fired = {"memory"};
  }
  e.wall_ns = 150'000'000;
  e.cpu_ns = 100'000'000;
  e.peak_memory_bytes = 30 << 20;
  e.stdout_summary = {3, std::string(64, 'c'), false};
  e.stderr_summary = {0, std::string(64, 'd'), false};
  e.validator_results = {{"stdout", "accepted", ""}};
  return e;
}

AuditOptions TestOptions(const TempDir& dir) {
  AuditOptions o;
  o.key_path = dir.File("audit.key");
  o.min_free_bytes = 0;
  return o;
}

std::string RawSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
  std::string err;
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    char* msg = nullptr;
    rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg);
    if (rc != SQLITE_OK) err = msg ? msg : sqlite3_errstr(rc);
    sqlite3_free(msg);
  } else {
    err = sqlite3_errstr(rc);
  }
  sqlite3_close_v2(db);
  return err;
}

std::string RawQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
      if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
        out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      }
    } else {
      out = std::string("ERROR: ") + sqlite3_errmsg(db);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close_v2(db);
  return out;
}

void BulkAppend(const std::string& path, int runs, const std::string& prefix) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  ASSERT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  const std::string log_id = RawQuery(path, "SELECT value FROM meta WHERE key = 'log_id'");
  ASSERT_EQ(log_id.size(), 32u);
  Sha256Digest prev = GenesisHash(log_id);
  int64_t seq = 0;
  {
    sqlite3_stmt* head = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1", -1,
                                 &head, nullptr),
              SQLITE_OK);
    if (sqlite3_step(head) == SQLITE_ROW) {
      seq = sqlite3_column_int64(head, 0);
      prev = *DigestFromHex(reinterpret_cast<const char*>(sqlite3_column_text(head, 1)));
    }
    sqlite3_finalize(head);
  }
  std::string sql = "INSERT INTO events (";
  for (auto name : EventColumnNames()) sql += std::string(name) + ", ";
  sql += "hash) VALUES (";
  for (size_t i = 1; i <= kNumEventColumns + 1; ++i) {
    // Appended piecewise: GCC 12's -Wrestrict misfires on "?" + std::to_string(i) at -O2.
    sql += '?';
    sql += std::to_string(i);
    sql += i <= kNumEventColumns ? ", " : ")";
  }
  sqlite3_stmt* ins = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &ins, nullptr), SQLITE_OK);
  auto insert = [&](EventRow row) {
    row.values[kColSeq] = ++seq;
    prev = ChainHash(prev, EncodeEvent(row));
    row.hash = ToHex(prev);
    for (size_t i = 0; i < kNumEventColumns; ++i) {
      const int col = static_cast<int>(i + 1);
      if (const auto* n = std::get_if<int64_t>(&row.values[i])) {
        sqlite3_bind_int64(ins, col, *n);
      } else if (const auto* t = std::get_if<std::string>(&row.values[i])) {
        sqlite3_bind_text(ins, col, t->data(), static_cast<int>(t->size()), SQLITE_TRANSIENT);
      } else {
        sqlite3_bind_null(ins, col);
      }
    }
    sqlite3_bind_text(ins, static_cast<int>(kNumEventColumns + 1), row.hash.c_str(), -1,
                      SQLITE_TRANSIENT);
    int rc = sqlite3_step(ins);
    sqlite3_reset(ins);
    return rc == SQLITE_DONE;
  };
  for (int i = 0; i < runs; ++i) {
    const std::string id = prefix + "-" + std::to_string(i);
    auto start = RowFromStart(SampleStart(id), 1'800'000'000'000'000'000 + i);
    auto end = RowFromEnd(SampleEnd(id), 1'800'000'000'000'000'000 + i);
    ASSERT_TRUE(start.ok() && end.ok());
    ASSERT_TRUE(insert(*start) && insert(*end)) << sqlite3_errmsg(db);
  }
  sqlite3_finalize(ins);
  ASSERT_EQ(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close_v2(db);
}

void CopyDb(const std::string& from, const std::string& to) {
  ASSERT_EQ(RawSql(from, "PRAGMA wal_checkpoint(TRUNCATE)"), "");
  std::error_code ec;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
  ASSERT_FALSE(ec) << ec.message();
  std::filesystem::remove(to + "-wal", ec);
  std::filesystem::remove(to + "-shm", ec);
}

ProcResult RunProcess(const std::vector<std::string>& argv) {
  ProcResult r;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) abort();
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  UniqueFd o(out[0]), e(err[0]);
  pollfd fds[2] = {{o.get(), POLLIN, 0}, {e.get(), POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string WriterBinary() { return SAFEX_AUDIT_TEST_WRITER; }

std::string RandomBytes(std::mt19937_64& rng, size_t max_len) {
  // Bytes that stress an encoding: separators, tags, quotes, invalid UTF-8, escapes.
  static const char kAlphabet[] = {'a',    'b',    'N', 'I',  'T', '\x01', '\x00',
                                   '"',    '\\',   ',', '{',  '}', '\xff', '\xc3',
                                   '\xa9', '\x1b', '[', '\n', ' '};
  std::uniform_int_distribution<size_t> len(0, max_len);
  std::uniform_int_distribution<size_t> pick(0, sizeof kAlphabet - 1);
  std::string s(len(rng), 'a');
  for (auto& c : s) c = kAlphabet[pick(rng)];
  return s;
}

EventRow RandomRow(std::mt19937_64& rng) {
  EventRow row;
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_int_distribution<int64_t> small(-3, 3);
  for (auto& v : row.values) {
    switch (kind(rng)) {
      case 0:
        v = std::monostate{};
        break;
      case 1:
        v = small(rng);
        break;
      case 2:
        v = static_cast<int64_t>(rng());
        break;
      default:
        v = RandomBytes(rng, 4);
        break;
    }
  }
  return row;
}

}  // namespace safex::audit::testing
