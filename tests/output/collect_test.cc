// Output collection on a temp dir laid out by the tests (catalogue F5-F8 at the unit level).
// Every test runs twice: with openat2, and with the fallback walk (openat + O_NOFOLLOW + fstat per
// component) that kernels without openat2 use, so that path cannot rot.
#include "supervisor/output/collect.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sha256.h"
#include "common/unique_fd.h"
#include "supervisor/output/output_files.h"
#include "supervisor/output/report_json.h"
#include "tests/support/test_support.h"

namespace safex::output {
namespace {

namespace fs = std::filesystem;
using plan::OverflowAction;
using plan::Validator;
using plan::ValidatorTarget;

constexpr char kSecret[] = "root:$6$host-secret:19000:0:99999:7:::\n";

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/safex-output-test.XXXXXX";
    const char* p = mkdtemp(tmpl);
    if (p == nullptr) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, std::string_view content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

Validator FileValidator(std::string path, uint64_t max = 1 << 20,
                        OverflowAction overflow = OverflowAction::kReject) {
  Validator v;
  v.target = ValidatorTarget::kFile;
  v.path = std::move(path);
  v.max_bytes = max;
  v.on_overflow = overflow;
  return v;
}

plan::Mount OutputMount(std::string target = "/data/out") {
  plan::Mount m;
  m.kind = plan::MountKind::kOutput;
  m.target = std::move(target);
  m.read_only = false;
  m.size_bytes = 16 << 20;
  return m;
}

class CollectTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    out_ = tmp_.path() + "/out";
    host_ = tmp_.path() + "/host";
    fs::create_directories(out_);
    fs::create_directories(host_);
    WriteFile(host_ + "/shadow", kSecret);
    WriteFile(host_ + "/result.json", "{\"host\":true}");
  }

  MountCollection Collect(std::vector<Validator> validators,
                          plan::OutputCollection caps = {100, 1 << 20},
                          CollectOptions options = {}) {
    Result<ValidatorSet> set = ValidatorSet::Compile(validators);
    EXPECT_TRUE(set.ok()) << set.status().ToString();
    set_ = std::make_unique<ValidatorSet>(std::move(set).value());
    UniqueFd dir(open(out_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    EXPECT_TRUE(dir.valid());
    options.force_fallback = GetParam();
    CollectBudget budget;
    MountCollection mc = CollectMount(dir.get(), OutputMount(), *set_, caps, &budget, options);
    if (GetParam()) {
      EXPECT_TRUE(mc.used_fallback);
    }
    return mc;
  }

  static const Refusal* Find(const MountCollection& mc, const std::string& path) {
    for (const Refusal& r : mc.refusals) {
      if (r.path == path) return &r;
    }
    return nullptr;
  }

  void ExpectHostUntouched() {
    EXPECT_EQ(ReadFile(host_ + "/shadow"), kSecret);
    EXPECT_EQ(ReadFile(host_ + "/result.json"), "{\"host\":true}");
  }

  TempDir tmp_;
  std::string out_;
  std::string host_;
  std::unique_ptr<ValidatorSet> set_;
};

TEST_P(CollectTest, CollectsDeclaredRegularFiles) {
  WriteFile(out_ + "/result.json", "{\"ok\":true}");
  WriteFile(out_ + "/logs/run.log", "line\n");
  WriteFile(out_ + "/logs/deep/more.log", "more\n");
  WriteFile(out_ + "/ignored.bin", "not declared");
  MountCollection mc =
      Collect({FileValidator("/data/out/result.json"), FileValidator("/data/out/logs/**/*.log")});
  EXPECT_TRUE(mc.refusals.empty());
  ASSERT_EQ(mc.files.size(), 3u);
  // Depth first, in name order.
  EXPECT_EQ(mc.files[0].relative_path, "result.json");
  EXPECT_EQ(mc.files[0].sandbox_path, "/data/out/result.json");
  EXPECT_EQ(mc.files[0].bytes, "{\"ok\":true}");
  EXPECT_EQ(mc.files[0].sha256, Sha256Hex("{\"ok\":true}"));
  EXPECT_EQ(mc.files[0].validators, (std::vector<size_t>{0}));
  EXPECT_EQ(mc.files[1].relative_path, "logs/run.log");
  EXPECT_EQ(mc.files[2].relative_path, "logs/deep/more.log");
  EXPECT_TRUE(mc.absent.empty());
}

TEST_P(CollectTest, AbsentLiteralPathIsReported) {
  MountCollection mc = Collect({FileValidator("/data/out/result.json")});
  EXPECT_TRUE(mc.files.empty());
  EXPECT_TRUE(mc.refusals.empty());
  EXPECT_EQ(mc.absent, (std::vector<std::string>{"/data/out/result.json"}));
}

// F5: an output file that is a symlink to a host file.
TEST_P(CollectTest, SymlinkToHostFileIsRefused) {
  ASSERT_EQ(symlink((host_ + "/shadow").c_str(), (out_ + "/result.json").c_str()), 0);
  ASSERT_EQ(symlink((host_ + "/shadow").c_str(), (out_ + "/a.txt").c_str()), 0);
  MountCollection mc =
      Collect({FileValidator("/data/out/result.json"), FileValidator("/data/out/*.txt")});
  EXPECT_TRUE(mc.files.empty());
  const Refusal* r = Find(mc, "/data/out/result.json");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reason, RefusalReason::kSymlink);
  ASSERT_NE(Find(mc, "/data/out/a.txt"), nullptr);
  EXPECT_EQ(Find(mc, "/data/out/a.txt")->reason, RefusalReason::kSymlink);
  ExpectHostUntouched();
}

TEST_P(CollectTest, SymlinkInAnIntermediateComponentIsRefused) {
  ASSERT_EQ(symlink(host_.c_str(), (out_ + "/sub").c_str()), 0);
  MountCollection mc = Collect({FileValidator("/data/out/sub/result.json")});
  EXPECT_TRUE(mc.files.empty());
  const Refusal* r = Find(mc, "/data/out/sub");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reason, RefusalReason::kSymlink);
  EXPECT_TRUE(mc.absent.empty());  // refused above it, not looked for
  ExpectHostUntouched();
}

// F6: the path is swapped for a symlink between listing and opening.
TEST_P(CollectTest, FileSwappedForSymlinkBeforeOpenIsRefused) {
  WriteFile(out_ + "/result.json", "{}");
  CollectOptions o;
  o.before_open = [&](const std::string& rel) {
    if (rel != "result.json") return;
    fs::remove(out_ + "/result.json");
    ASSERT_EQ(symlink((host_ + "/shadow").c_str(), (out_ + "/result.json").c_str()), 0);
  };
  MountCollection mc = Collect({FileValidator("/data/out/result.json")}, {100, 1 << 20}, o);
  EXPECT_TRUE(mc.files.empty());
  const Refusal* r = Find(mc, "/data/out/result.json");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reason, RefusalReason::kSymlink);
  EXPECT_NE(r->detail.find("became a symlink"), std::string::npos);
  ExpectHostUntouched();
}

TEST_P(CollectTest, DirectorySwappedForSymlinkBeforeOpenIsRefused) {
  WriteFile(out_ + "/sub/result.json", "{}");
  CollectOptions o;
  o.before_open = [&](const std::string& rel) {
    if (rel != "sub") return;
    fs::rename(out_ + "/sub", out_ + "/moved");
    ASSERT_EQ(symlink(host_.c_str(), (out_ + "/sub").c_str()), 0);
  };
  MountCollection mc = Collect({FileValidator("/data/out/sub/*.json")}, {100, 1 << 20}, o);
  EXPECT_TRUE(mc.files.empty());
  const Refusal* r = Find(mc, "/data/out/sub");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reason, RefusalReason::kSymlink);
  EXPECT_TRUE(mc.absent.empty());  // refused above it, not looked for
  ExpectHostUntouched();
}

TEST_P(CollectTest, FileReplacedByAnotherFileOrAFifoIsRefused) {
  WriteFile(out_ + "/a.json", "{}");
  WriteFile(out_ + "/b.json", "{}");
  WriteFile(out_ + "/other", "[]");
  CollectOptions o;
  o.before_open = [&](const std::string& rel) {
    if (rel == "a.json") fs::rename(out_ + "/other", out_ + "/a.json");
    if (rel == "b.json") {
      fs::remove(out_ + "/b.json");
      ASSERT_EQ(mkfifo((out_ + "/b.json").c_str(), 0600), 0);
    }
  };
  // A FIFO opened without O_NONBLOCK would hang this test forever.
  MountCollection mc = Collect({FileValidator("/data/out/*.json")}, {100, 1 << 20}, o);
  EXPECT_TRUE(mc.files.empty());
  ASSERT_NE(Find(mc, "/data/out/a.json"), nullptr);
  EXPECT_EQ(Find(mc, "/data/out/a.json")->reason, RefusalReason::kChanged);
  ASSERT_NE(Find(mc, "/data/out/b.json"), nullptr);
  EXPECT_EQ(Find(mc, "/data/out/b.json")->reason, RefusalReason::kChanged);
}

// F7: a hardlink to a host file (possible here because the temp dir shares a filesystem).
TEST_P(CollectTest, HardlinkToHostFileIsRefused) {
  ASSERT_EQ(link((host_ + "/shadow").c_str(), (out_ + "/result.json").c_str()), 0);
  MountCollection mc = Collect({FileValidator("/data/out/result.json")});
  EXPECT_TRUE(mc.files.empty());
  const Refusal* r = Find(mc, "/data/out/result.json");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reason, RefusalReason::kHardlink);
  ExpectHostUntouched();
}

// F8: FIFO, socket, device, sparse huge file.
TEST_P(CollectTest, FifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(mkfifo((out_ + "/result.json").c_str(), 0600), 0);
  MountCollection mc = Collect({FileValidator("/data/out/result.json")});
  ASSERT_NE(Find(mc, "/data/out/result.json"), nullptr);
  EXPECT_EQ(Find(mc, "/data/out/result.json")->reason, RefusalReason::kFifo);
}

TEST_P(CollectTest, SocketIsRefused) {
  const std::string path = out_ + "/result.json";
  UniqueFd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  MountCollection mc = Collect({FileValidator("/data/out/result.json")});
  ASSERT_NE(Find(mc, "/data/out/result.json"), nullptr);
  EXPECT_EQ(Find(mc, "/data/out/result.json")->reason, RefusalReason::kSocket);
}

TEST_P(CollectTest, DeviceNodeIsRefused) {
  SAFEX_REQUIRE_ROOT();
  ASSERT_EQ(mknod((out_ + "/result.json").c_str(), S_IFCHR | 0600, makedev(1, 3)), 0);
  ASSERT_EQ(mknod((out_ + "/disk.json").c_str(), S_IFBLK | 0600, makedev(7, 0)), 0);
  MountCollection mc = Collect({FileValidator("/data/out/*.json")});
  EXPECT_TRUE(mc.files.empty());
  ASSERT_NE(Find(mc, "/data/out/result.json"), nullptr);
  EXPECT_EQ(Find(mc, "/data/out/result.json")->reason, RefusalReason::kDevice);
  ASSERT_NE(Find(mc, "/data/out/disk.json"), nullptr);
  EXPECT_EQ(Find(mc, "/data/out/disk.json")->reason, RefusalReason::kDevice);
}

TEST_P(CollectTest, SparseTenGibFileIsSizedBeforeReading) {
  {
    UniqueFd fd(open((out_ + "/big.bin").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(ftruncate(fd.get(), 10LL << 30), 0);
  }
  // overflow = reject: refused unread.
  MountCollection rej = Collect({FileValidator("/data/out/big.bin", 1 << 20)});
  EXPECT_TRUE(rej.files.empty());
  ASSERT_NE(Find(rej, "/data/out/big.bin"), nullptr);
  EXPECT_EQ(Find(rej, "/data/out/big.bin")->reason, RefusalReason::kTooBig);
  // overflow = truncate: only the first max bytes are read.
  MountCollection trunc =
      Collect({FileValidator("/data/out/big.bin", 1 << 20, OverflowAction::kTruncate)});
  ASSERT_EQ(trunc.files.size(), 1u);
  EXPECT_EQ(trunc.files[0].bytes.size(), 1u << 20);
  EXPECT_TRUE(trunc.files[0].truncated);
  EXPECT_EQ(trunc.files[0].size, 10ULL << 30);
  // No per-file cap: the total cap refuses it, unread.
  MountCollection total = Collect({FileValidator("/data/out/big.bin", 0)}, {10, 4 << 20});
  ASSERT_NE(Find(total, "/data/out/big.bin"), nullptr);
  EXPECT_EQ(Find(total, "/data/out/big.bin")->reason, RefusalReason::kTotalTooBig);
}

TEST_P(CollectTest, FileCountAndTotalCaps) {
  for (int i = 0; i < 5; ++i) WriteFile(out_ + "/f" + std::to_string(i) + ".txt", "0123456789");
  MountCollection many = Collect({FileValidator("/data/out/*.txt")}, {3, 1 << 20});
  EXPECT_EQ(many.files.size(), 3u);
  ASSERT_EQ(many.refusals.size(), 2u);
  EXPECT_EQ(many.refusals[0].reason, RefusalReason::kTooMany);
  EXPECT_EQ(many.refusals[0].path, "/data/out/f3.txt");
  MountCollection total = Collect({FileValidator("/data/out/*.txt")}, {10, 25});
  EXPECT_EQ(total.files.size(), 2u);
  ASSERT_EQ(total.refusals.size(), 3u);
  EXPECT_EQ(total.refusals[0].reason, RefusalReason::kTotalTooBig);
}

TEST_P(CollectTest, DirectoryNamedByALiteralPathIsRefused) {
  fs::create_directories(out_ + "/result.json");
  MountCollection mc = Collect({FileValidator("/data/out/result.json")});
  ASSERT_NE(Find(mc, "/data/out/result.json"), nullptr);
  EXPECT_EQ(Find(mc, "/data/out/result.json")->reason, RefusalReason::kNotRegular);
}

TEST_P(CollectTest, UndeclaredHostileEntriesAreLeftAlone) {
  ASSERT_EQ(mkfifo((out_ + "/pipe").c_str(), 0600), 0);
  ASSERT_EQ(symlink("/etc/shadow", (out_ + "/link").c_str()), 0);
  ASSERT_EQ(link((host_ + "/shadow").c_str(), (out_ + "/hard").c_str()), 0);
  WriteFile(out_ + "/result.json", "{}");
  MountCollection mc = Collect({FileValidator("/data/out/*.json")});
  EXPECT_TRUE(mc.refusals.empty());
  ASSERT_EQ(mc.files.size(), 1u);
}

// Issue 12: names that the report would have to escape (controls, newlines, invalid UTF-8, bidi
// controls) reached the caller's directory verbatim while the report named them escaped.
TEST_P(CollectTest, UnsafeNamesAreRefusedUnread) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"a\nb.txt", "a\\nb.txt"},                          // newline
      {"tab\t.txt", "tab\\t.txt"},                        // C0
      {"esc\x1b[2J.txt", "esc\\x1b[2J.txt"},              // C0 (ESC)
      {"del\x7f.txt", "del\\x7f.txt"},                    // DEL
      {"nel\xc2\x85.txt", "nel\\u{85}.txt"},              // C1 (U+0085)
      {"bad\xff.txt", "bad\\xff.txt"},                    // invalid UTF-8
      {"over\xc0\xaf.txt", "over\\xc0\\xaf.txt"},         // overlong '/'
      {"rlo\xe2\x80\xaegpj.txt", "rlo\\u{202e}gpj.txt"},  // U+202E RIGHT-TO-LEFT OVERRIDE
      {"lri\xe2\x81\xa6.txt", "lri\\u{2066}.txt"},        // U+2066 LEFT-TO-RIGHT ISOLATE
      {"lrm\xe2\x80\x8e.txt", "lrm\\u{200e}.txt"},        // U+200E LEFT-TO-RIGHT MARK
      {"rlm\xe2\x80\x8f.txt", "rlm\\u{200f}.txt"},        // U+200F RIGHT-TO-LEFT MARK
      {"alm\xd8\x9c.txt", "alm\\u{61c}.txt"},             // U+061C ARABIC LETTER MARK
      {"zw\xe2\x80\x8b.txt", "zw\\u{200b}.txt"},          // U+200B ZERO WIDTH SPACE
  };
  for (const auto& [name, shown] : bad) WriteFile(out_ + "/" + name, "payload");
  WriteFile(out_ + "/good.txt", "fine");
  WriteFile(out_ + "/caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac.txt", "fine");  // UTF-8 is fine
  std::vector<std::string> opened;
  CollectOptions o;
  o.before_open = [&](const std::string& rel) { opened.push_back(rel); };
  MountCollection mc = Collect({FileValidator("/data/out/*.txt")}, {100, 1 << 20}, o);
  ASSERT_EQ(mc.files.size(), 2u);
  EXPECT_EQ(mc.files[0].relative_path, "caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac.txt");
  EXPECT_EQ(mc.files[1].relative_path, "good.txt");
  EXPECT_EQ(opened.size(), 2u) << "an unsafe name was opened";
  ASSERT_EQ(mc.refusals.size(), bad.size());
  for (const Refusal& r : mc.refusals) {
    EXPECT_EQ(r.reason, RefusalReason::kBadName) << r.path;
    EXPECT_EQ(r.validators, (std::vector<size_t>{0})) << r.path;
    EXPECT_STREQ(RefusalReasonName(r.reason), "unsafe-name");
  }
  for (const auto& [name, shown] : bad) {
    bool found = false;
    for (const Refusal& r : mc.refusals) {
      if (r.detail.find("\"" + shown) != std::string::npos) found = true;
    }
    EXPECT_TRUE(found) << shown;
  }
  // The detail is safe to print: escaped, no raw control bytes.
  for (const Refusal& r : mc.refusals) {
    for (unsigned char c : r.detail) EXPECT_TRUE(c >= 0x20 && c != 0x7f) << r.detail;
  }
}

TEST_P(CollectTest, UnsafeDirectoryComponentIsRefusedAndNotEntered) {
  WriteFile(out_ + "/ok/result.json", "{}");
  WriteFile(out_ + "/sub\x1b[31m/result.json", "{}");
  WriteFile(out_ + "/rtl\xe2\x80\xae/result.json", "{}");
  std::vector<std::string> opened;
  CollectOptions o;
  o.before_open = [&](const std::string& rel) { opened.push_back(rel); };
  MountCollection mc = Collect({FileValidator("/data/out/**/*.json")}, {100, 1 << 20}, o);
  ASSERT_EQ(mc.files.size(), 1u);
  EXPECT_EQ(mc.files[0].relative_path, "ok/result.json");
  ASSERT_EQ(mc.refusals.size(), 2u);
  const Refusal* esc = Find(mc, "/data/out/sub\\x1b[31m");
  ASSERT_NE(esc, nullptr);
  EXPECT_EQ(esc->reason, RefusalReason::kBadName);
  ASSERT_NE(Find(mc, "/data/out/rtl\\u{202e}"), nullptr);
  EXPECT_EQ(opened, (std::vector<std::string>{"ok", "ok/result.json"}));
  // A literal declared path below an unsafe directory is not "absent": it was refused.
  mc = Collect({FileValidator("/data/out/sub\x1b[31m/result.json")});
  EXPECT_TRUE(mc.absent.empty());
  ASSERT_EQ(mc.refusals.size(), 1u);
  EXPECT_EQ(mc.refusals[0].reason, RefusalReason::kBadName);
}

TEST_P(CollectTest, UndeclaredUnsafeNamesAreLeftAlone) {
  WriteFile(out_ + "/x\n.bin", "not declared");
  WriteFile(out_ + "/d\xff/y.bin", "not declared");
  WriteFile(out_ + "/result.json", "{}");
  MountCollection mc = Collect({FileValidator("/data/out/*.json")});
  EXPECT_TRUE(mc.refusals.empty());
  ASSERT_EQ(mc.files.size(), 1u);
}

TEST_P(CollectTest, WalkIsBounded) {
  for (int i = 0; i < 10; ++i) WriteFile(out_ + "/f" + std::to_string(i), "x");
  CollectOptions o;
  o.max_walk_entries = 5;
  MountCollection wide = Collect({FileValidator("/data/out/**")}, {100, 1 << 20}, o);
  ASSERT_EQ(wide.refusals.size(), 1u);
  EXPECT_EQ(wide.refusals[0].reason, RefusalReason::kWalkLimit);
  fs::remove_all(out_);
  WriteFile(out_ + "/a/b/c/d/e.txt", "deep");
  CollectOptions d;
  d.max_walk_depth = 2;
  MountCollection deep = Collect({FileValidator("/data/out/**")}, {100, 1 << 20}, d);
  EXPECT_TRUE(deep.files.empty());
  ASSERT_NE(Find(deep, "/data/out/a/b/c"), nullptr);
  EXPECT_EQ(Find(deep, "/data/out/a/b/c")->reason, RefusalReason::kWalkLimit);
}

TEST_P(CollectTest, WriteBeneathNeverFollowsOrOverwrites) {
  const std::string dest = tmp_.path() + "/dest";
  fs::create_directories(dest);
  UniqueFd d(open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  WriteOptions o;
  o.force_fallback = GetParam();
  ASSERT_TRUE(WriteFileBeneath(d.get(), "a/b/c.txt", "hello", o).ok());
  EXPECT_EQ(ReadFile(dest + "/a/b/c.txt"), "hello");
  EXPECT_EQ(fs::status(dest + "/a/b/c.txt").permissions(),
            fs::perms::owner_read | fs::perms::owner_write);
  // Existing file: never overwritten.
  Status again = WriteFileBeneath(d.get(), "a/b/c.txt", "evil", o);
  EXPECT_EQ(again.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(ReadFile(dest + "/a/b/c.txt"), "hello");
  // A symlink in the destination, as a directory component or as the file: never followed.
  ASSERT_EQ(symlink(host_.c_str(), (dest + "/link").c_str()), 0);
  Status via_dir = WriteFileBeneath(d.get(), "link/result.json", "evil", o);
  EXPECT_FALSE(via_dir.ok());
  ASSERT_EQ(symlink((host_ + "/shadow").c_str(), (dest + "/leaf").c_str()), 0);
  EXPECT_FALSE(WriteFileBeneath(d.get(), "leaf", "evil", o).ok());
  ASSERT_EQ(symlink((host_ + "/new").c_str(), (dest + "/dangling").c_str()), 0);
  EXPECT_FALSE(WriteFileBeneath(d.get(), "dangling", "evil", o).ok());
  EXPECT_FALSE(fs::exists(host_ + "/new"));
  EXPECT_FALSE(WriteFileBeneath(d.get(), "../escape", "evil", o).ok());
  ExpectHostUntouched();
}

INSTANTIATE_TEST_SUITE_P(Openat2AndFallback, CollectTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "Fallback" : "Openat2";
                         });

// The supervisor's side: collect, validate, write the accepted files.
class OutputFilesTest : public ::testing::Test {
 protected:
  TempDir tmp_;
};

TEST_F(OutputFilesTest, ValidatesCollectedFilesAndWritesAccepted) {
  const std::string out = tmp_.path() + "/out";
  const std::string dest = tmp_.path() + "/dest";
  fs::create_directories(dest);
  WriteFile(out + "/result.json", "{\"key\":\"AKIAIOSFODNN7EXAMPLE\"}");
  WriteFile(out + "/notes.txt", "fine\n");
  Validator json = FileValidator("/data/out/*.json");
  json.json = plan::JsonRule{};
  json.regex = {plan::RegexRule{"AKIA[0-9A-Z]{16}", plan::RegexAction::kRedact, "[REDACTED]"}};
  Validator txt = FileValidator("/data/out/*.txt");
  txt.utf8 = true;
  Result<ValidatorSet> set = ValidatorSet::Compile({json, txt});
  ASSERT_TRUE(set.ok());
  OutputFiles files(*set, {10, 1 << 20});
  {
    UniqueFd dir(open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    files.Collect(OutputMount(), dir.get());
  }
  EXPECT_FALSE(files.rejected());
  ASSERT_EQ(files.files().size(), 2u);
  UniqueFd d(open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(files.WriteAccepted(d.get()).ok());
  EXPECT_EQ(ReadFile(dest + "/result.json"), "{\"key\":\"[REDACTED]\"}");
  EXPECT_EQ(ReadFile(dest + "/notes.txt"), "fine\n");
  const nlohmann::json j = OutputFilesToJson(files);
  EXPECT_FALSE(j["rejected"].get<bool>());
  EXPECT_EQ(j["files"].size(), 2u);
}

TEST_F(OutputFilesTest, RefusalOrInvalidFileRejectsAndNamesTheFile) {
  const std::string out = tmp_.path() + "/out";
  WriteFile(out + "/bad.json", "{\"a\":[1,}");
  WriteFile(out + "/good.json", "{}");
  ASSERT_EQ(symlink("/etc/passwd", (out + "/link.json").c_str()), 0);
  Validator json = FileValidator("/data/out/*.json");
  json.json = plan::JsonRule{};
  Result<ValidatorSet> set = ValidatorSet::Compile({json});
  ASSERT_TRUE(set.ok());
  OutputFiles files(*set, {10, 1 << 20});
  {
    UniqueFd dir(open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    files.Collect(OutputMount(), dir.get());
  }
  ASSERT_TRUE(files.rejected());
  // The symlink is found while walking; the JSON problem while validating afterwards.
  EXPECT_EQ(files.rejection()->check, "collect");
  EXPECT_EQ(files.rejection()->subject, "/data/out/link.json");
  EXPECT_NE(files.rejection()->detail.find("symlink"), std::string::npos);
  ASSERT_EQ(files.files().size(), 2u);
  const ValidationReport& bad = files.files()[0].report;
  ASSERT_TRUE(bad.rejected);
  EXPECT_EQ(bad.rejection()->json_path, "$.a[1]");
  EXPECT_EQ(bad.rejection()->subject, "/data/out/bad.json");
  EXPECT_FALSE(files.files()[1].report.rejected);
  // Only accepted files are written.
  const std::string dest = tmp_.path() + "/dest";
  fs::create_directories(dest);
  UniqueFd d(open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(files.WriteAccepted(d.get()).ok());
  EXPECT_TRUE(fs::exists(dest + "/good.json"));
  EXPECT_FALSE(fs::exists(dest + "/bad.json"));
  EXPECT_FALSE(fs::exists(dest + "/link.json"));
}

TEST_F(OutputFilesTest, CapsCountAcrossMountsAndLayoutNamesTheMounts) {
  const std::string a = tmp_.path() + "/a";
  const std::string b = tmp_.path() + "/b";
  WriteFile(a + "/x.txt", "1");
  WriteFile(b + "/y.txt", "2");
  WriteFile(b + "/z.txt", "3");
  Result<ValidatorSet> set =
      ValidatorSet::Compile({FileValidator("/out/a/*.txt"), FileValidator("/out/b/*.txt")});
  ASSERT_TRUE(set.ok());
  OutputFiles files(*set, {2, 1 << 20});
  for (const auto& [dir, target] : {std::pair{a, "/out/a"}, std::pair{b, "/out/b"}}) {
    UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    files.Collect(OutputMount(target), fd.get());
  }
  ASSERT_TRUE(files.rejected());
  EXPECT_EQ(files.rejection()->validator, "outputs");
  EXPECT_EQ(files.rejection()->validator_index, kOutputsBlock);
  EXPECT_EQ(files.rejection()->subject, "/out/b/z.txt");
  const std::string dest = tmp_.path() + "/dest";
  fs::create_directories(dest);
  UniqueFd d(open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(files.WriteAccepted(d.get()).ok());
  EXPECT_EQ(ReadFile(dest + "/out/a/x.txt"), "1");
  EXPECT_EQ(ReadFile(dest + "/out/b/y.txt"), "2");
}

TEST_F(OutputFilesTest, UnsafeNameRejectsTheRunAndIsNotDelivered) {
  const std::string out = tmp_.path() + "/out";
  WriteFile(out + "/report.txt", "fine");
  WriteFile(out + "/invoice\xe2\x80\xaetxt.exe.txt", "payload");
  Result<ValidatorSet> set = ValidatorSet::Compile({FileValidator("/data/out/*.txt")});
  ASSERT_TRUE(set.ok());
  OutputFiles files(*set, {10, 1 << 20});
  {
    UniqueFd dir(open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    files.Collect(OutputMount(), dir.get());
  }
  ASSERT_TRUE(files.rejected());
  EXPECT_EQ(files.rejection()->check, "collect");
  EXPECT_EQ(files.rejection()->subject, "/data/out/invoice\\u{202e}txt.exe.txt");
  EXPECT_NE(files.rejection()->detail.find("unsafe-name"), std::string::npos)
      << files.rejection()->detail;
  ASSERT_EQ(files.files().size(), 1u);  // only report.txt was collected
  const std::string dest = tmp_.path() + "/dest";
  fs::create_directories(dest);
  UniqueFd d(open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(files.WriteAccepted(d.get()).ok());
  EXPECT_TRUE(fs::exists(dest + "/report.txt"));
  EXPECT_FALSE(fs::exists(dest + "/invoice\xe2\x80\xaetxt.exe.txt"));
  const nlohmann::json j = OutputFilesToJson(files);
  EXPECT_TRUE(j["rejected"].get<bool>());
}

TEST_F(OutputFilesTest, HostileNamesStayEscapedInJson) {
  const std::string out = tmp_.path() + "/out";
  WriteFile(out + "/\x1b]0;pwn\x07\xff.txt", "x");
  Result<ValidatorSet> set = ValidatorSet::Compile({FileValidator("/data/out/*.txt", 0)});
  ASSERT_TRUE(set.ok());
  OutputFiles files(*set, {10, 1 << 20});
  UniqueFd fd(open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  files.Collect(OutputMount(), fd.get());
  const std::string dumped = OutputFilesToJson(files).dump();  // throws on invalid UTF-8
  EXPECT_NE(dumped.find("\\\\x1b]0;pwn\\\\x07\\\\xff.txt"), std::string::npos) << dumped;
}

}  // namespace
}  // namespace safex::output
