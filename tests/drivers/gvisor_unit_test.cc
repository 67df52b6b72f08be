// Pure parts of the gVisor driver: the OCI spec built from a plan, the seccomp mapping, the
// debug-log scanner, runsc version parsing, and the generated rootfs. Unprivileged.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sha256.h"
#include "drivers/gvisor/gvisor_driver.h"
#include "drivers/gvisor/launch_report.h"
#include "drivers/gvisor/oci_spec.h"
#include "drivers/gvisor/runsc.h"
#include "drivers/gvisor/runsc_command.h"
#include "drivers/gvisor/runsc_version_cache.h"
#include "drivers/gvisor/sandbox_log.h"
#include "drivers/gvisor/visible_cpus.h"
#include "drivers/rootfs.h"
#include "drivers/run_dir.h"
#include "tests/drivers/test_plans.h"

namespace safex::drivers::gvisor {
namespace {

using drivers::testing::BasePlan;
using drivers::testing::Input;
using drivers::testing::Output;
using nlohmann::json;

OciLayout LayoutFor(const plan::Plan& p) {
  OciLayout l;
  l.cgroups_path = "/safex/r1";
  for (const plan::Mount& m : p.mounts) {
    switch (m.kind) {
      case plan::MountKind::kBind:
        l.mount_sources.push_back(m.source);
        break;
      case plan::MountKind::kTmpfs:
        l.mount_sources.push_back("");
        break;
      case plan::MountKind::kInput:
        l.mount_sources.push_back("/run/safex/r1/input-empty");
        break;
      case plan::MountKind::kOutput:
        l.mount_sources.push_back("/run/safex/r1/out/0");
        break;
    }
  }
  l.pids_backstop = 1024;
  return l;
}

TEST(OciSpecTest, ProcessIsExactlyThePlan) {
  plan::Plan p = BasePlan();
  p.env = {{"B", "2"}, {"A", "x y;$z"}};
  p.process.cwd = "/tmp";
  std::vector<std::string> argv = {"/bin/sh", "-c", "echo $A; `id`"};
  auto spec = BuildOciSpec(p, argv, LayoutFor(p), {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const json& proc = (*spec)["process"];
  EXPECT_EQ(proc["args"], json(argv));
  EXPECT_EQ(proc["env"], json({"A=x y;$z", "B=2"}));  // exactly plan.env, nothing else
  EXPECT_EQ(proc["cwd"], "/tmp");
  EXPECT_EQ(proc["user"]["uid"], 65534);
  EXPECT_EQ(proc["user"]["gid"], 65534);
  EXPECT_EQ(proc["noNewPrivileges"], true);
  EXPECT_EQ(proc["terminal"], false);
  for (const char* set : {"bounding", "effective", "inheritable", "permitted", "ambient"}) {
    EXPECT_TRUE(proc["capabilities"][set].empty()) << set;
  }
  std::map<std::string, uint64_t> rl;
  for (const json& r : proc["rlimits"]) {
    EXPECT_EQ(r["soft"], r["hard"]);
    rl[r["type"]] = r["hard"];
  }
  EXPECT_EQ(rl["RLIMIT_NOFILE"], 256u);
  EXPECT_EQ(rl["RLIMIT_NPROC"], 64u);
  EXPECT_EQ(rl["RLIMIT_FSIZE"], 64ull << 20);
  EXPECT_EQ(rl["RLIMIT_CORE"], 0u);
  EXPECT_EQ(rl.count("RLIMIT_CPU"), 0u);  // gVisor does not enforce it; the driver does
  EXPECT_EQ((*spec)["root"]["readonly"], true);
  EXPECT_EQ((*spec)["linux"]["cgroupsPath"], "/safex/r1");
  EXPECT_EQ((*spec)["linux"]["resources"]["memory"]["limit"], 256ull << 20);
  EXPECT_FALSE((*spec)["linux"].contains("seccomp"));
}

TEST(OciSpecTest, MountsFollowThePlan) {
  plan::Plan p = BasePlan();
  p.mounts.push_back(Input("/data/in"));
  p.mounts.push_back(Output("/data/out", 1 << 20));
  auto spec = BuildOciSpec(p, {"/bin/true"}, LayoutFor(p), {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const json& mounts = (*spec)["mounts"];
  ASSERT_EQ(mounts.size(), 3 + p.mounts.size());
  EXPECT_EQ(mounts[0]["destination"], "/proc");
  EXPECT_EQ(mounts[1]["destination"], "/dev");
  EXPECT_EQ(mounts[2]["destination"], "/sys");
  EXPECT_EQ(mounts[3], json({{"destination", "/usr"},
                             {"type", "bind"},
                             {"source", "/usr"},
                             {"options", {"bind", "ro", "nosuid", "nodev"}}}));
  const json& tmp = mounts[7];
  EXPECT_EQ(tmp["destination"], "/tmp");
  EXPECT_EQ(tmp["type"], "tmpfs");
  EXPECT_EQ(tmp["options"], json({"size=16777216", "mode=1777", "nosuid", "nodev", "noexec"}));
  EXPECT_EQ(mounts[8]["source"], "/run/safex/r1/input-empty");
  EXPECT_EQ(mounts[8]["options"][1], "ro");
  EXPECT_EQ(mounts[9]["source"], "/run/safex/r1/out/0");
  EXPECT_EQ(mounts[9]["options"], json({"bind", "rw", "nosuid", "nodev", "noexec"}));
}

// The launcher (launch_report.h) is the container's first process: argv follows its "--"
// verbatim, its directory is bound read-only (exec allowed) and no plan mount may shadow it.
TEST(OciSpecTest, TheLauncherRunsFirstFromItsOwnReadOnlyMount) {
  plan::Plan p = BasePlan();
  OciLayout layout = LayoutFor(p);
  layout.launcher_dir = "/usr/local/lib/safex/launch";
  auto spec = BuildOciSpec(p, {"python3", "--", "-c"}, layout, {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ((*spec)["process"]["args"],
            json({"/.safex-launch/safex-launch", "--", "python3", "--", "-c"}));
  EXPECT_EQ((*spec)["mounts"][3], json({{"destination", "/.safex-launch"},
                                        {"type", "bind"},
                                        {"source", "/usr/local/lib/safex/launch"},
                                        {"options", {"bind", "ro", "nosuid", "nodev"}}}));
  plan::Plan shadow = p;
  shadow.mounts.push_back(drivers::testing::Tmpfs("/.safex-launch", 1 << 20));
  OciLayout shadow_layout = LayoutFor(shadow);
  shadow_layout.launcher_dir = layout.launcher_dir;
  EXPECT_EQ(BuildOciSpec(shadow, {"/bin/true"}, shadow_layout, {}).status().code(),
            Status::Code::kInvalidArgument);
}

TEST(OciSpecTest, RefusesWhatItCannotExpress) {
  plan::Plan p = BasePlan();
  EXPECT_FALSE(BuildOciSpec(p, {}, LayoutFor(p), {}).ok());
  plan::Plan bad = p;
  bad.mounts.push_back(drivers::testing::BindRo("/proc/self"));
  EXPECT_EQ(BuildOciSpec(bad, {"/bin/true"}, LayoutFor(bad), {}).status().code(),
            Status::Code::kInvalidArgument);
  bad = p;
  bad.env["X=Y"] = "1";
  EXPECT_EQ(BuildOciSpec(bad, {"/bin/true"}, LayoutFor(bad), {}).status().code(),
            Status::Code::kInvalidArgument);
  bad = p;
  bad.limits.pids = 0;
  EXPECT_FALSE(BuildOciSpec(bad, {"/bin/true"}, LayoutFor(bad), {}).ok());
}

// The host config's `platforms` is a gate, not a default: a plan naming a platform the host does
// not offer is refused before anything runs (CheckRequest needs no probe and no privilege).
TEST(GvisorCheckRequestTest, APlatformTheHostDoesNotOfferIsRefused) {
  GvisorOptions o;
  o.platforms = {"ptrace"};
  GvisorDriver only_ptrace(o);
  plan::Plan p = BasePlan();
  RunRequest req;
  req.run_id = "r1";
  req.argv = {"/bin/true"};
  p.gvisor.platform = "systrap";
  Status s = only_ptrace.CheckRequest(p, req);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("does not offer the systrap platform"), std::string::npos)
      << s.message();
  p.gvisor.platform = "ptrace";
  EXPECT_TRUE(only_ptrace.CheckRequest(p, req).ok());
}

TEST(SeccompMappingTest, ErrnoKillAndLogRules) {
  plan::Seccomp s;
  s.default_action = plan::SyscallAction::kAllow;
  s.rules = {{"mkdir", plan::SyscallAction::kErrno, 1},
             {"ptrace", plan::SyscallAction::kKill, 0},
             {"uname", plan::SyscallAction::kLog, 0}};
  auto j = BuildSeccomp(s, {});
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  ASSERT_TRUE(j->has_value());
  const json& f = **j;
  EXPECT_EQ(f["defaultAction"], "SCMP_ACT_ALLOW");
  EXPECT_EQ(f["architectures"], json({"SCMP_ARCH_X86_64"}));
  ASSERT_EQ(f["syscalls"].size(), 2u);  // the log rule is an allow: same as the default
  EXPECT_EQ(f["syscalls"][0],
            json({{"names", {"mkdir"}}, {"action", "SCMP_ACT_ERRNO"}, {"errnoRet", 1}}));
  EXPECT_EQ(f["syscalls"][1], json({{"names", {"ptrace"}}, {"action", "SCMP_ACT_KILL"}}));
  LoggedSyscalls logged = SyscallsToLog(s);
  EXPECT_FALSE(logged.all);
  EXPECT_EQ(logged.names, std::vector<std::string>{"uname"});
}

TEST(SeccompMappingTest, NothingToFilterMeansNoFilter) {
  plan::Seccomp s;
  s.rules = {{"uname", plan::SyscallAction::kLog, 0}};
  auto j = BuildSeccomp(s, {});
  ASSERT_TRUE(j.ok());
  EXPECT_FALSE(j->has_value());
}

TEST(SeccompMappingTest, DenyByDefault) {
  plan::Seccomp s;
  s.default_action = plan::SyscallAction::kErrno;
  s.default_errno = 1;
  s.rules = {{"read", plan::SyscallAction::kAllow, 0}, {"write", plan::SyscallAction::kLog, 0}};
  auto j = BuildSeccomp(s, {});
  ASSERT_TRUE(j.ok());
  const json& f = **j;
  EXPECT_EQ(f["defaultAction"], "SCMP_ACT_ERRNO");
  EXPECT_EQ(f["defaultErrnoRet"], 1);
  ASSERT_EQ(f["syscalls"].size(), 2u);
  EXPECT_EQ(f["syscalls"][0]["action"], "SCMP_ACT_ALLOW");
  EXPECT_EQ(f["syscalls"][1]["action"], "SCMP_ACT_ALLOW");
}

TEST(SeccompMappingTest, AnErrnoThisRunscCannotReturnIsRefused) {
  plan::Seccomp s;
  s.rules = {{"mkdir", plan::SyscallAction::kErrno, 38 /* ENOSYS */}};
  auto j = BuildSeccomp(s, {});
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(j.status().message().find("errnoRet"), std::string::npos);
  SeccompOptions newer;
  newer.errno_ret_supported = true;
  auto k = BuildSeccomp(s, newer);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ((**k)["syscalls"][0]["errnoRet"], 38);
  s.rules[0].name = "mk dir";
  EXPECT_EQ(BuildSeccomp(s, newer).status().code(), Status::Code::kInvalidArgument);
}

TEST(SandboxLogScannerTest, ReadsExitForkFailuresAndLoggedCalls) {
  SandboxLogScanner sc;
  sc.SetLogged({"uname"}, false);
  std::string log =
      "I1129 22:35:26.0 1 main.go:199] Args: [runsc-sandbox ...]\n"
      "I1129 22:35:26.1 9 kernel.go:1043] EXEC: [/bin/sh -c x]\n"
      "I1129 22:35:26.3 9 strace.go:573] [   1:   1] python3 E clone(CLONE_CHILD_CLEARTID, 0x0)\n"
      "I1129 22:35:26.3 9 strace.go:611] [   1:   1] python3 X clone(CLONE_CHILD_CLEARTID, 0x0) = "
      "2 (0x2) (1.3ms)\n"
      "I1129 22:35:26.9 9 strace.go:611] [   1:   1] python3 X clone(CLONE_CHILD_CLEARTID, 0x0) = "
      "0 (0x0) errno=11 (try again) (858.1µs)\n"
      "I1129 22:35:26.9 9 strace.go:611] [   3:   3] a X b X vfork() = 0 (0x0) errno=11 (try "
      "again) (1µs)\n"
      "I1129 22:35:26.9 9 strace.go:573] [   1:   1] sh E uname(0x7ffe)\n"
      "I1129 22:35:26.9 9 strace.go:611] [   1:   1] sh X uname(0x7ffe) = 0 (0x0) (3µs)\n"
      "I1129 22:35:26.9 9 strace.go:611] [   1:   1] sh X read(0x3) = 0 (0x0) errno=11 (try again) "
      "(3µs)\n"
      "I1129 22:35:26.96 9 boot.go:534] application exiting with exit status 3\n";
  // Fed in awkward pieces to exercise line reassembly.
  for (size_t i = 0; i < log.size(); i += 7) sc.Feed(std::string_view(log).substr(i, 7));
  sc.Finish();
  EXPECT_TRUE(sc.app_started());
  EXPECT_EQ(sc.fork_eagain(), 2u);
  EXPECT_EQ(sc.logged(), (std::map<std::string, uint64_t>{{"uname", 1}}));
  ASSERT_TRUE(sc.app_exit().has_value());
  EXPECT_FALSE(sc.app_exit()->signaled);
  EXPECT_EQ(sc.app_exit()->value, 3);

  sc.Feed("I1 9 boot.go:534] application exiting with killed by signal 9\n");
  EXPECT_TRUE(sc.app_exit()->signaled);
  EXPECT_EQ(sc.app_exit()->value, 9);
}

TEST(SandboxLogScannerTest, HugeLinesStayBounded) {
  SandboxLogScanner sc;
  std::string big(10 << 20, 'x');
  sc.Feed("I1 9 kernel.go:1] EXEC: [" + big);
  sc.Feed(big);
  sc.Feed("\nI1 9 boot.go:534] application exiting with exit status 0\n");
  EXPECT_TRUE(sc.app_started());
  EXPECT_EQ(sc.app_exit()->value, 0);
  EXPECT_EQ(sc.lines(), 2u);
}

TEST(RunscVersionTest, Parses) {
  EXPECT_EQ(RunscVersionString("runsc version 0.0~20240729.0\nspec: 1.2.0\n"), "0.0~20240729.0");
  EXPECT_EQ(RunscReleaseDate("0.0~20240729.0"), 20240729);
  EXPECT_EQ(RunscReleaseDate("release-20231218.0"), 20231218);
  EXPECT_EQ(RunscReleaseDate("0.0~20221219.0"), 20221219);
  EXPECT_FALSE(RunscReleaseDate("1.2.3").has_value());
  EXPECT_FALSE(RunscReleaseDate("123456789").has_value());
  EXPECT_EQ(RunscVersionString("garbage"), "");
}

// The cached facts (version, SHA-256) of one binary: returned only for that binary's identity,
// and only from a file that root alone could have written.
TEST(RunscVersionCacheTest, HitOnlyForTheSameBinaryAndATrustworthyFile) {
  char tmpl[] = "/tmp/sxtest-rvc-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string bin = dir + "/runsc";
  const std::string cache = dir + "/runsc-version";
  std::ofstream(bin) << "binary one";
  struct stat st;
  ASSERT_EQ(stat(bin.c_str(), &st), 0);
  const std::string sha1 = Sha256Hex("binary one");
  EXPECT_FALSE(ReadRunscVersionCache(cache, st).has_value()) << "no cache yet";
  WriteRunscVersionCache(cache, st, {sha1, "runsc version 0.0~20240729.0\n"});
  auto hit = ReadRunscVersionCache(cache, st);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->version_output, "runsc version 0.0~20240729.0\n");
  EXPECT_EQ(hit->sha256, sha1);
  struct stat cs;
  ASSERT_EQ(stat(cache.c_str(), &cs), 0);
  EXPECT_EQ(cs.st_mode & 0777, 0600u);

  // The binary rewritten (size and times change): a miss.
  std::ofstream(bin) << "binary two, longer";
  struct stat st2;
  ASSERT_EQ(stat(bin.c_str(), &st2), 0);
  EXPECT_FALSE(ReadRunscVersionCache(cache, st2).has_value());
  // chmod alone changes ctime: a miss.
  WriteRunscVersionCache(cache, st2, {sha1, "v2\n"});
  ASSERT_EQ(chmod(bin.c_str(), 0700), 0);
  struct stat st3;
  ASSERT_EQ(stat(bin.c_str(), &st3), 0);
  if (st3.st_ctim.tv_sec != st2.st_ctim.tv_sec || st3.st_ctim.tv_nsec != st2.st_ctim.tv_nsec) {
    EXPECT_FALSE(ReadRunscVersionCache(cache, st3).has_value());
  }
  ASSERT_TRUE(ReadRunscVersionCache(cache, st2).has_value());
  EXPECT_EQ(ReadRunscVersionCache(cache, st2)->version_output, "v2\n");
  // A cache file others can write is not believed; nor is a symlink or garbage.
  ASSERT_EQ(chmod(cache.c_str(), 0666), 0);
  EXPECT_FALSE(ReadRunscVersionCache(cache, st2).has_value());
  ASSERT_EQ(unlink(cache.c_str()), 0);
  ASSERT_EQ(symlink(bin.c_str(), cache.c_str()), 0);
  EXPECT_FALSE(ReadRunscVersionCache(cache, st2).has_value());
  ASSERT_EQ(unlink(cache.c_str()), 0);
  std::ofstream(cache) << "not a cache\n";
  ASSERT_EQ(chmod(cache.c_str(), 0600), 0);
  EXPECT_FALSE(ReadRunscVersionCache(cache, st2).has_value());
  // A cache of the older format (identity line, then the version, no hash) is a miss, so the
  // binary is hashed once after the upgrade; so is one whose hash is not 64 hex digits.
  std::string v1 = RunscIdentity(st2);
  v1.replace(v1.find(" 2 "), 3, " 1 ");
  std::ofstream(cache, std::ios::trunc) << v1 << "\nrunsc version 0.0~20240729.0\n";
  EXPECT_FALSE(ReadRunscVersionCache(cache, st2).has_value());
  std::ofstream(cache, std::ios::trunc)
      << RunscIdentity(st2) << "\nsha256 " << std::string(64, 'Z') << "\nv2\n";
  EXPECT_FALSE(ReadRunscVersionCache(cache, st2).has_value());
  std::filesystem::remove_all(dir);
}

// The hash is of the file the identity names: of its bytes, and refused once the file changed
// after its identity was taken (it would be recorded under the identity of another file).
TEST(RunscVersionCacheTest, TheHashIsOfTheBinaryTheIdentityNames) {
  char tmpl[] = "/tmp/sxtest-rvh-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string bin = dir + "/runsc";
  const std::string big(3 << 20, 'r');  // more than one read
  std::ofstream(bin) << big;
  struct stat st;
  ASSERT_EQ(stat(bin.c_str(), &st), 0);
  auto sha = HashRunsc(bin, st);
  ASSERT_TRUE(sha.ok()) << sha.status().message();
  EXPECT_EQ(*sha, Sha256Hex(big));
  std::ofstream(bin, std::ios::app) << "x";  // changed since `st` was taken
  auto changed = HashRunsc(bin, st);
  EXPECT_FALSE(changed.ok());
  EXPECT_FALSE(HashRunsc(dir + "/missing", st).ok());
  std::filesystem::remove_all(dir);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(RootfsTest, FreshRootHasOnlyMountPointsAndAMinimalEtc) {
  char tmpl[] = "/tmp/safex-rootfs-XXXXXX";
  std::string root = mkdtemp(tmpl);
  plan::Plan p = BasePlan();
  p.mounts.push_back(Output("/data/out", 1 << 20));
  p.mounts.push_back(drivers::testing::BindRo("/etc/hostname"));  // a file bind
  std::vector<std::string> sources = {"/usr", "/lib", "/lib64", "/bin", "", "/x", "/etc/hostname"};
  ASSERT_TRUE(PrepareRootfs(root, p, sources, "", RootMountPoints()).ok());
  struct stat st;
  for (const char* d : {"/proc", "/dev", "/sys", "/.safex-launch", "/usr", "/lib", "/lib64", "/bin",
                        "/tmp", "/data/out"}) {
    ASSERT_EQ(lstat((root + d).c_str(), &st), 0) << d;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << d;
  }
  ASSERT_EQ(lstat((root + "/etc/hostname").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(ReadAll(root + "/etc/passwd"),
            "root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n");
  EXPECT_EQ(ReadAll(root + "/etc/group"), "root:x:0:\nnogroup:x:65534:\n");
  EXPECT_NE(ReadAll(root + "/etc/hosts").find("127.0.0.1\tlocalhost"), std::string::npos);
  EXPECT_EQ(access((root + "/etc/shadow").c_str(), F_OK), -1);
  EXPECT_TRUE(RemoveTree(root).ok());
  EXPECT_NE(access(root.c_str(), F_OK), 0);
}

TEST(RemoveTreeTest, DoesNotFollowSymlinks) {
  char tmpl[] = "/tmp/safex-rmtree-XXXXXX";
  std::string root = mkdtemp(tmpl);
  char keep_tmpl[] = "/tmp/safex-keep-XXXXXX";
  std::string keep = mkdtemp(keep_tmpl);
  std::ofstream(keep + "/precious") << "x";
  ASSERT_EQ(mkdir((root + "/a").c_str(), 0700), 0);
  ASSERT_EQ(symlink(keep.c_str(), (root + "/a/link").c_str()), 0);
  std::ofstream(root + "/a/f") << "y";
  EXPECT_TRUE(RemoveTree(root).ok());
  EXPECT_NE(access(root.c_str(), F_OK), 0);
  EXPECT_EQ(access((keep + "/precious").c_str(), F_OK), 0);
  EXPECT_TRUE(RemoveTree(keep).ok());
  EXPECT_TRUE(RemoveTree("/tmp/safex-does-not-exist").ok());
}

// The count a gVisor sandbox shows is the plan's CPUs, never fewer than two
// (drivers/gvisor/visible_cpus.h: one would also be the Sentry's GOMAXPROCS); no limit, the host's.
TEST(VisibleCpusTest, TheSentryCountsThePlansCpusButAtLeastTwo) {
  EXPECT_EQ(SentryCpuCount(0), 0u);
  EXPECT_EQ(SentryCpuCount(1), 2u);
  EXPECT_EQ(SentryCpuCount(2), 2u);
  EXPECT_EQ(SentryCpuCount(3), 3u);
  EXPECT_EQ(SentryCpuCount(64), 64u);
}

// The cpuset a run starts with holds that many of the host's CPUs; a host with no more than that
// is left as it is (the sandbox then counts the host's, which are no more than asked).
TEST(VisibleCpusTest, TheNarrowedCpusetHoldsTheCount) {
  const auto count = [](const std::string& list) {
    return list.empty() ? 0 : 1 + std::count(list.begin(), list.end(), ',');
  };
  EXPECT_EQ(count(cgroup::NarrowCpuList("0-63", SentryCpuCount(1))), 2);
  EXPECT_EQ(count(cgroup::NarrowCpuList("0-63", SentryCpuCount(8))), 8);
  EXPECT_EQ(count(cgroup::NarrowCpuList("0-3,8-11", 6)), 6);
  EXPECT_EQ(cgroup::NarrowCpuList("0-1", SentryCpuCount(1)), "");
  EXPECT_EQ(cgroup::NarrowCpuList("0-63", 0), "");
  EXPECT_EQ(cgroup::NarrowCpuList("not a list", 2), "");
}

}  // namespace
}  // namespace safex::drivers::gvisor
