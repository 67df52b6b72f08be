// Output validation and collection end to end, with real runs: `safex run` (the built binary),
// real runsc, a real audit log. Catalogue cases F5-F8 (hostile output files) and S5 (hostile
// output), and a 5 GB stdout flood. Every test checks that nothing is left on the machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "common/sha256.h"
#include "tests/support/leak_check.h"
#include "tests/support/run_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace safex {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessOutput;
using testing::RunSafex;
using testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A standalone untrusted policy (not extending base-untrusted, whose stdout validator strips
// controls before ours could see them) with the given validators.
std::string PolicyText(const std::string& name, const std::string& output_limit,
                       const std::string& validators) {
  return "policy \"" + name +
         "\" {\n"
         "  trust = untrusted\n"
         "  isolation = gvisor\n"
         "  limits {\n"
         "    wall_time = 30s\n"
         "    cpu_time = 20s\n"
         "    memory = 512MiB\n"
         "    pids = 64\n"
         "    open_files = 256\n"
         "    output = " +
         output_limit +
         "\n"
         "    disk = 64MiB\n"
         "    cpus = 1\n"
         "  }\n"
         "  rootfs host_readonly [\"/usr\", \"/lib\", \"/lib64\", \"/bin\"]\n"
         "  mount tmpfs at \"/tmp\" { size = 64MiB }\n"
         "  mount output at \"/data/out\" { size = 16MiB }\n"
         "  outputs {\n"
         "    max_files = 16\n"
         "    max_total = 16MiB\n"
         "  }\n"
         "  env {\n"
         "    set PATH = \"/usr/bin:/bin\"\n"
         "    set PYTHONDONTWRITEBYTECODE = \"1\"\n"
         "  }\n"
         "  process {\n"
         "    user = 65534\n"
         "    group = 65534\n"
         "    cwd = \"/tmp\"\n"
         "  }\n" +
         validators + "}\n";
}

constexpr char kValidators[] =
    "  validate stdout {\n"
    "    max = 1MiB\n"
    "    utf8 = true\n"
    "    control = reject\n"
    "    reject /AKIA[0-9A-Z]{16}/\n"
    "    reject /-----BEGIN [A-Z ]*PRIVATE KEY-----/\n"
    "    redact /gh[pousr]_[A-Za-z0-9]{36}/ with \"[github token]\"\n"
    "  }\n"
    "  validate stderr {\n"
    "    max = 64KiB\n"
    "    control = strip\n"
    "    overflow = truncate\n"
    "  }\n"
    "  validate file \"/data/out/result.json\" {\n"
    "    max = 1MiB\n"
    "    json = true\n"
    "  }\n"
    "  validate file \"/data/out/*.txt\" {\n"
    "    max = 1MiB\n"
    "  }\n";

class RunOutputTest : public testing::LeakCheckedTest {
 protected:
  void SetUp() override {
    SAFEX_REQUIRE_ROOT();
    SAFEX_REQUIRE(access("/usr/local/bin/runsc", X_OK) == 0, "runsc (scripts/install-deps.sh)");
    LeakCheckedTest::SetUp();
    policy_ = dir_.Write("output-test.policy", PolicyText("output-test", "1MiB", kValidators));
    out_ = out_parent_.Join("out");
  }

  // safex run --json --policy POLICY --output OUT -- python3 -c CODE
  nlohmann::json RunPython(const std::string& code, const std::string& policy = "") {
    std::vector<std::string> args = {"run",         "--json",
                                     "--policy",    policy.empty() ? policy_ : policy,
                                     "--audit-db",  dir_.Join("audit.db"),
                                     "--audit-key", dir_.Join("audit.key"),
                                     "--output",    out_,
                                     "--",          "python3",
                                     "-c",          code};
    last_ = RunSafex(args);
    nlohmann::json j = nlohmann::json::parse(last_.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << last_.out << "\nstderr: " << last_.err;
    if (j.is_discarded()) return nlohmann::json::object();
    EXPECT_EQ(j["exit_status"], last_.status);
    return j;
  }

  audit::RunSummary AuditOf(const nlohmann::json& j) {
    audit::AuditOptions o;
    o.read_only = true;
    auto log = audit::AuditLog::Open(dir_.Join("audit.db"), o);
    EXPECT_TRUE(log.ok()) << log.status().message();
    if (!log.ok()) return {};
    auto detail = (*log)->GetRun(j["run_id"].get<std::string>());
    EXPECT_TRUE(detail.ok()) << detail.status().message();
    return detail.ok() ? detail->run : audit::RunSummary{};
  }

  static const nlohmann::json* Refusal(const nlohmann::json& j, const std::string& path) {
    if (!j.contains("files")) return nullptr;
    for (const auto& r : j["files"]["refusals"]) {
      if (r["path"] == path) return &r;
    }
    return nullptr;
  }

  void ExpectRejected(const nlohmann::json& j) {
    EXPECT_EQ(last_.status, 122) << j.dump(1);
    EXPECT_EQ(j["verdict"], "validator-rejected") << j.dump(1);
    EXPECT_EQ(AuditOf(j).verdict, "validator-rejected");
  }

  TempDir dir_;
  TempDir out_parent_;
  std::string policy_;
  std::string out_;
  ProcessOutput last_;
};

// S5: bad UTF-8.
TEST_F(RunOutputTest, InvalidUtf8OnStdoutIsRejectedWithItsOffset) {
  nlohmann::json j =
      RunPython("import sys; sys.stdout.buffer.write(b'fine\\n\\xc0\\x80 overlong')");
  ExpectRejected(j);
  EXPECT_EQ(j["stdout"]["text"], "");
  EXPECT_EQ(j["stdout"]["rejected"], true);
  const nlohmann::json& f = j["stdout"]["validation"]["findings"].back();
  EXPECT_EQ(f["check"], "utf8");
  EXPECT_EQ(f["offset"], 5);
  EXPECT_EQ(f["line"], 2);
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("utf8"));
}

// S5: ANSI escapes. Rejected on stdout (control = reject), stripped on stderr (control = strip);
// nothing raw reaches the caller's terminal or the log line.
TEST_F(RunOutputTest, TerminalEscapesAreRejectedOrStrippedAndNeverReachTheTerminal) {
  nlohmann::json j = RunPython(
      "import sys\n"
      "sys.stderr.write('\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\x1b[0m warning\\n')\n"
      "print('ok \\x1b]8;;http://evil\\x1b\\\\link\\x1b]8;;\\x1b\\\\')\n");
  ExpectRejected(j);
  const nlohmann::json& f = j["stdout"]["validation"]["findings"].back();
  EXPECT_EQ(f["check"], "control");
  EXPECT_EQ(f["offset"], 3);
  EXPECT_EQ(j["stderr"]["text"], "red warning\n");
  EXPECT_EQ(j["stderr"]["rejected"], false);
  // Without --json: what the caller's terminal receives.
  ProcessOutput plain = RunSafex({"run", "--policy", policy_, "--audit-db", dir_.Join("audit.db"),
                                  "--audit-key", dir_.Join("audit.key"), "--", "python3", "-c",
                                  "import sys\n"
                                  "sys.stderr.write('\\x1b[2Jerr\\n')\n"
                                  "print('\\x1b]0;pwned\\x07')\n"});
  EXPECT_EQ(plain.status, 122) << plain.err;
  EXPECT_EQ(plain.out, "");
  EXPECT_THAT(plain.err, HasSubstr("err\n"));
  EXPECT_THAT(plain.err, HasSubstr("validator-rejected"));
  EXPECT_EQ(plain.err.find('\x1b'), std::string::npos) << plain.err;
  EXPECT_EQ(plain.err.find('\x07'), std::string::npos) << plain.err;
}

// S5: a 100,000-deep JSON document is rejected at the depth cap with its path.
TEST_F(RunOutputTest, HundredThousandDeepJsonIsRejectedWithPath) {
  const std::string policy = dir_.Write(
      "json-out.policy", PolicyText("json-out", "1MiB",
                                    "  validate stdout {\n    max = 1MiB\n    json = true\n  }\n"));
  nlohmann::json j = RunPython("print('[' * 100000)", policy);
  ExpectRejected(j);
  const nlohmann::json& f = j["stdout"]["validation"]["findings"].back();
  EXPECT_EQ(f["check"], "json");
  EXPECT_EQ(f["offset"], 64);
  EXPECT_THAT(f["json_path"].get<std::string>(), HasSubstr("$[0][0][0]"));
  EXPECT_THAT(f["detail"].get<std::string>(), HasSubstr("json_max_depth = 64"));
  // The same document as an output file.
  nlohmann::json file = RunPython("open('/data/out/result.json', 'w').write('{\"a\":' * 100000)");
  ExpectRejected(file);
  EXPECT_FALSE(fs::exists(out_ + "/result.json"));
  const nlohmann::json& report = file["files"]["files"][0]["report"];
  EXPECT_EQ(report["rejected"], true);
  EXPECT_THAT(report["findings"].back()["json_path"].get<std::string>(), HasSubstr("$.a.a.a"));
}

// S5: secret-shaped strings: rejected without being echoed, or redacted; digests recorded.
TEST_F(RunOutputTest, SecretShapedOutputIsRejectedOrRedacted) {
  nlohmann::json aws = RunPython("print('config ok'); print('key=AKIA' + 'IOSFODNN7EXAMPLE')");
  ExpectRejected(aws);
  EXPECT_EQ(aws["stdout"]["text"], "");
  EXPECT_THAT(aws["reason"].get<std::string>(), HasSubstr("AKIA[0-9A-Z]{16}"));
  EXPECT_THAT(aws["reason"].get<std::string>(), HasSubstr("byte 14 (line 2)"));
  EXPECT_THAT(aws.dump(), Not(HasSubstr("AKIAIOSFODNN7EXAMPLE")));

  nlohmann::json key = RunPython("print('-----BEGIN ' + 'OPENSSH PRIVATE KEY-----')");
  ExpectRejected(key);

  const std::string token = "ghp_" + std::string(36, 'x');
  nlohmann::json gh = RunPython("print('token=ghp_' + 'x' * 36 + ' end')");
  EXPECT_EQ(last_.status, 0) << gh.dump(1);
  EXPECT_EQ(gh["verdict"], "ok");
  EXPECT_EQ(gh["stdout"]["text"], "token=[github token] end\n");
  EXPECT_THAT(gh.dump(), Not(HasSubstr(token)));
  const std::string raw = "token=" + token + " end\n";
  EXPECT_EQ(gh["stdout"]["sha256"], Sha256Hex(raw));
  EXPECT_EQ(gh["stdout"]["delivered_sha256"], Sha256Hex("token=[github token] end\n"));
  audit::RunSummary row = AuditOf(gh);
  ASSERT_TRUE(row.stdout_summary.has_value());
  EXPECT_EQ(row.stdout_summary->sha256, Sha256Hex(raw));
  bool redaction_recorded = false;
  for (const auto& v : row.validator_results) {
    if (v.detail.find("redact") != std::string::npos) redaction_recorded = true;
    EXPECT_EQ(v.detail.find(token), std::string::npos);
  }
  EXPECT_TRUE(redaction_recorded);
}

// A 5 GB stdout flood: the capture stops at the output limit, the run is stopped promptly (verdict
// output-limit, not timeout), and the supervisor's memory stays bounded.
TEST_F(RunOutputTest, FiveGigabyteStdoutFloodIsStoppedWithBoundedMemory) {
  nlohmann::json j = RunPython(
      "import sys\n"
      "b = b'A' * (1 << 20)\n"
      "for _ in range(5 * 1024): sys.stdout.buffer.write(b)\n");
  EXPECT_EQ(last_.status, 123) << j.dump(1);
  EXPECT_EQ(j["verdict"], "output-limit");
  EXPECT_EQ(j["stdout"]["truncated"], true);
  EXPECT_LE(j["stdout"]["captured_bytes"].get<uint64_t>(), 1u << 20);
  EXPECT_LT(j["wall_ns"].get<uint64_t>(), 30'000'000'000ULL);
  struct rusage ru {};
  ASSERT_EQ(getrusage(RUSAGE_CHILDREN, &ru), 0);
  // The largest of safex and the runsc processes it reaped, in KiB: far below 5 GB.
  EXPECT_LT(ru.ru_maxrss, 512 * 1024);
}

// F5: an output file that is a symlink to a host file.
TEST_F(RunOutputTest, SymlinkToAHostFileIsRefused) {
  const std::string shadow_before = Sha256Hex(ReadFile("/etc/shadow"));
  nlohmann::json j = RunPython(
      "import os\n"
      "os.symlink('/etc/shadow', '/data/out/result.json')\n"
      "os.symlink('/etc/passwd', '/data/out/notes.txt')\n");
  ExpectRejected(j);
  const nlohmann::json* r = Refusal(j, "/data/out/result.json");
  ASSERT_NE(r, nullptr) << j["files"].dump(1);
  EXPECT_EQ((*r)["reason"], "symlink");
  ASSERT_NE(Refusal(j, "/data/out/notes.txt"), nullptr);
  EXPECT_FALSE(fs::exists(fs::symlink_status(out_ + "/result.json")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(out_ + "/notes.txt")));
  EXPECT_EQ(Sha256Hex(ReadFile("/etc/shadow")), shadow_before);
}

// F6: a process keeps swapping the output path for a symlink. Collection starts only after every
// process of the run is gone and is fd-relative: it sees one stable state, and a symlink is
// refused.
TEST_F(RunOutputTest, PathSwappedForASymlinkIsNeverFollowed) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    fs::remove_all(out_);
    nlohmann::json j = RunPython(
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    while True:\n"
        "        try:\n"
        "            open('/data/out/n.tmp', 'w').write('mine')\n"
        "            os.replace('/data/out/n.tmp', '/data/out/notes.txt')\n"
        "            os.symlink('/etc/shadow', '/data/out/l.tmp')\n"
        "            os.replace('/data/out/l.tmp', '/data/out/notes.txt')\n"
        "        except OSError:\n"
        "            pass\n"
        "time.sleep(0.5)\n");
    if (j["verdict"] == "ok") {
      EXPECT_EQ(ReadFile(out_ + "/notes.txt"), "mine");
    } else {
      ExpectRejected(j);
      const nlohmann::json* r = Refusal(j, "/data/out/notes.txt");
      ASSERT_NE(r, nullptr) << j.dump(1);
      EXPECT_EQ((*r)["reason"], "symlink");
      EXPECT_FALSE(fs::exists(fs::symlink_status(out_ + "/notes.txt")));
    }
  }
}

// F7: a hardlink to a host file is impossible (the output is its own filesystem); two names for
// one file inside the output are refused.
TEST_F(RunOutputTest, HardlinksAreImpossibleOrRefused) {
  nlohmann::json j = RunPython(
      "import os, errno\n"
      "try:\n"
      "    os.link('/usr/bin/python3', '/data/out/host.txt')\n"
      "    print('linked')\n"
      "except OSError as e:\n"
      "    print(errno.errorcode[e.errno])\n"
      "open('/data/out/a.txt', 'w').write('x')\n"
      "os.link('/data/out/a.txt', '/data/out/b.txt')\n");
  ExpectRejected(j);
  EXPECT_THAT(j["stdout"]["text"].get<std::string>(), Not(HasSubstr("linked")));
  ASSERT_NE(Refusal(j, "/data/out/a.txt"), nullptr) << j["files"].dump(1);
  EXPECT_EQ((*Refusal(j, "/data/out/a.txt"))["reason"], "hardlink");
  EXPECT_EQ((*Refusal(j, "/data/out/b.txt"))["reason"], "hardlink");
  EXPECT_EQ(Refusal(j, "/data/out/host.txt"), nullptr);
}

// F8: a FIFO (collection must not block on it), a device node, a huge sparse file.
// gVisor keeps a FIFO made on a gofer mount inside the sandbox (it never reaches the host's
// output directory): the name is then absent on the host. Either way nothing blocks and nothing
// is delivered.
TEST_F(RunOutputTest, FifoIsRefusedOrNeverReachesTheHost) {
  nlohmann::json j = RunPython(
      "import os, stat\n"
      "os.mkfifo('/data/out/result.json')\n"
      "print(stat.S_ISFIFO(os.lstat('/data/out/result.json').st_mode))\n");
  EXPECT_EQ(j["stdout"]["text"], "True\n") << j.dump(1);
  if (j["verdict"] == "validator-rejected") {
    ASSERT_NE(Refusal(j, "/data/out/result.json"), nullptr) << j.dump(1);
    EXPECT_EQ((*Refusal(j, "/data/out/result.json"))["reason"], "fifo");
  } else {
    EXPECT_EQ(j["verdict"], "ok") << j.dump(1);
    EXPECT_EQ(j["files"]["absent"], nlohmann::json::array({"/data/out/result.json"}));
  }
  EXPECT_FALSE(fs::exists(fs::symlink_status(out_ + "/result.json")));
}

TEST_F(RunOutputTest, DeviceNodesCannotBeMadeOrAreRefused) {
  nlohmann::json j = RunPython(
      "import os, stat, errno\n"
      "try:\n"
      "    os.mknod('/data/out/result.json', 0o600 | stat.S_IFCHR, os.makedev(1, 3))\n"
      "    print('made')\n"
      "except OSError as e:\n"
      "    print(errno.errorcode[e.errno])\n");
  if (j["stdout"]["text"] == "made\n") {
    ExpectRejected(j);
    EXPECT_EQ((*Refusal(j, "/data/out/result.json"))["reason"], "device");
  } else {
    EXPECT_EQ(j["verdict"], "ok") << j.dump(1);
    EXPECT_THAT(j["stdout"]["text"].get<std::string>(), ::testing::AnyOf("EPERM\n", "EACCES\n"));
  }
}

TEST_F(RunOutputTest, HugeSparseFileIsSizedBeforeReading) {
  nlohmann::json j = RunPython(
      "f = open('/data/out/big.txt', 'w')\n"
      "try:\n"
      "    f.truncate(10 << 30)\n"
      "except OSError:\n"
      "    f.truncate(60 << 20)  # the disk limit (RLIMIT_FSIZE) is 64 MiB\n"
      "f.close()\n");
  ExpectRejected(j);
  const nlohmann::json* r = Refusal(j, "/data/out/big.txt");
  ASSERT_NE(r, nullptr) << j.dump(1);
  EXPECT_EQ((*r)["reason"], "too-big");
  EXPECT_THAT((*r)["detail"].get<std::string>(), HasSubstr("not read"));
  EXPECT_FALSE(fs::exists(out_ + "/big.txt"));
}

// Accepted files are delivered, validated like streams.
TEST_F(RunOutputTest, AcceptedFilesAreDelivered) {
  nlohmann::json j = RunPython(
      "import json\n"
      "json.dump({'ok': True}, open('/data/out/result.json', 'w'))\n"
      "open('/data/out/notes.txt', 'w').write('hello\\n')\n"
      "open('/data/out/ignored.bin', 'w').write('not declared')\n");
  EXPECT_EQ(last_.status, 0) << j.dump(1);
  EXPECT_EQ(ReadFile(out_ + "/result.json"), "{\"ok\": true}");
  EXPECT_EQ(ReadFile(out_ + "/notes.txt"), "hello\n");
  EXPECT_FALSE(fs::exists(out_ + "/ignored.bin"));
  EXPECT_EQ(j["files"]["files"].size(), 2u);
}

}  // namespace
}  // namespace safex
