// Plan -> GuestSpec: the same meaning for every field, and refusals for what a microVM cannot do.
#include "drivers/microvm/guest_spec_builder.h"

#include <gtest/gtest.h>

namespace safex::microvm {
namespace {

plan::Plan Plan() {
  plan::Plan p;
  p.backend = plan::Backend::kMicrovm;
  p.limits.wall_time_ns = 10;
  p.limits.cpu_time_ns = 20;
  p.limits.memory_bytes = 30;
  p.limits.pids = 40;
  p.limits.open_files = 50;
  p.limits.output_bytes = 60;
  p.limits.disk_bytes = 70;
  p.limits.cpus = 2;
  p.process.uid = 1234;
  p.process.gid = 5678;
  p.process.cwd = "/tmp";
  plan::Mount usr;
  usr.kind = plan::MountKind::kBind;
  usr.source = "/bin";
  usr.target = "/bin";
  plan::Mount tmp;
  tmp.kind = plan::MountKind::kTmpfs;
  tmp.target = "/tmp";
  tmp.read_only = false;
  tmp.size_bytes = 1 << 20;
  tmp.noexec = true;
  plan::Mount in;
  in.kind = plan::MountKind::kInput;
  in.target = "/in";
  plan::Mount out;
  out.kind = plan::MountKind::kOutput;
  out.target = "/out";
  out.read_only = false;
  out.size_bytes = 2 << 20;
  p.mounts = {usr, tmp, in, out};
  p.env = {{"LANG", "C.UTF-8"}, {"PATH", "/opt/bin:/bin"}};
  p.seccomp.default_action = plan::SyscallAction::kAllow;
  p.seccomp.rules = {{"bpf", plan::SyscallAction::kErrno, 1},
                     {"ptrace", plan::SyscallAction::kKill, 1}};
  p.outputs.max_files = 7;
  p.outputs.max_total_bytes = 8;
  return p;
}

GuestSpecInputs Inputs() {
  GuestSpecInputs in;
  in.disks = {0, 0, 0, 0};
  in.image_paths = {"/usr/bin", "", "", ""};
  in.is_file = {false, false, false, false};
  in.has_input_image = true;
  return in;
}

TEST(GuestSpecBuilderTest, MapsEveryField) {
  auto s = BuildGuestSpec(Plan(), {"python3", "-c", "print(1)"}, Inputs());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->argv, (std::vector<std::string>{"python3", "-c", "print(1)"}));
  EXPECT_EQ(s->env, (std::vector<std::string>{"LANG=C.UTF-8", "PATH=/opt/bin:/bin"}));
  EXPECT_EQ(s->path_search, "/opt/bin:/bin");
  EXPECT_EQ(s->uid, 1234u);
  EXPECT_EQ(s->gid, 5678u);
  EXPECT_EQ(s->cwd, "/tmp");
  EXPECT_EQ(s->cpu_time_ns, 20u);
  EXPECT_EQ(s->memory_bytes, 30u);
  EXPECT_EQ(s->pids, 40u);
  EXPECT_EQ(s->open_files, 50u);
  EXPECT_EQ(s->output_bytes, 60u);
  EXPECT_EQ(s->disk_bytes, 70u);
  EXPECT_EQ(s->cpus, 2u);
  ASSERT_EQ(s->mounts.size(), 4u);
  EXPECT_EQ(s->mounts[0].kind, GuestMountKind::kBind);
  EXPECT_EQ(s->mounts[0].target, "/bin");
  EXPECT_EQ(s->mounts[0].image_path, "/usr/bin");  // the realpath inside the image
  EXPECT_TRUE(s->mounts[0].read_only);
  EXPECT_EQ(s->mounts[1].kind, GuestMountKind::kTmpfs);
  EXPECT_EQ(s->mounts[1].size_bytes, 1u << 20);
  EXPECT_TRUE(s->mounts[1].noexec);
  EXPECT_FALSE(s->mounts[1].read_only);
  EXPECT_EQ(s->mounts[2].kind, GuestMountKind::kInput);
  EXPECT_EQ(s->mounts[2].image_path, "/");
  EXPECT_EQ(s->mounts[3].kind, GuestMountKind::kOutput);
  EXPECT_EQ(s->mounts[3].size_bytes, 2u << 20);
  EXPECT_EQ(s->seccomp_default, GuestSyscallAction::kAllow);
  ASSERT_EQ(s->seccomp_rules.size(), 2u);
  EXPECT_EQ(s->seccomp_rules[0].name, "bpf");
  EXPECT_EQ(s->seccomp_rules[0].action, GuestSyscallAction::kErrno);
  EXPECT_EQ(s->seccomp_rules[1].action, GuestSyscallAction::kKill);
  EXPECT_EQ(s->max_output_files, 7u);
  EXPECT_EQ(s->max_output_bytes, 8u);
  EXPECT_FALSE(s->network.has_value());
}

TEST(GuestSpecBuilderTest, DefaultPathWhenThePlanSetsNone) {
  plan::Plan p = Plan();
  p.env.erase("PATH");
  auto s = BuildGuestSpec(p, {"ls"}, Inputs());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->path_search, kDefaultPathSearch);
  EXPECT_EQ(s->env, (std::vector<std::string>{"LANG=C.UTF-8"}));  // nothing added
}

TEST(GuestSpecBuilderTest, NoInputDirectoryMeansAnEmptyInputMount) {
  GuestSpecInputs in = Inputs();
  in.has_input_image = false;
  auto s = BuildGuestSpec(Plan(), {"ls"}, in);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->mounts[2].image_path, "");
}

TEST(GuestSpecBuilderTest, WritableBindMountIsUnavailable) {
  plan::Plan p = Plan();
  p.mounts[0].read_only = false;
  auto s = BuildGuestSpec(p, {"ls"}, Inputs());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(s.status().message().find("read-only image"), std::string::npos);
}

TEST(GuestSpecBuilderTest, RefusesWhatCannotBePassedExactly) {
  EXPECT_FALSE(BuildGuestSpec(Plan(), {}, Inputs()).ok());
  EXPECT_FALSE(BuildGuestSpec(Plan(), {std::string("a\0b", 3)}, Inputs()).ok());
  plan::Plan p = Plan();
  p.env["BAD"] = std::string("x\0y", 3);
  EXPECT_FALSE(BuildGuestSpec(p, {"ls"}, Inputs()).ok());
  p = Plan();
  p.env["A=B"] = "x";
  EXPECT_FALSE(BuildGuestSpec(p, {"ls"}, Inputs()).ok());
  p = Plan();
  p.limits.pids = 0;
  EXPECT_FALSE(BuildGuestSpec(p, {"ls"}, Inputs()).ok());
}

// A pooled VM's spec is the cold one's without the request: the same plan part, no argv, no
// stdin; the request brings them, refused as BuildGuestSpec refuses them.
TEST(GuestSpecBuilderTest, ASpecAheadIsTheColdSpecWithoutTheRequest) {
  GuestSpecInputs in = Inputs();
  in.has_stdin = true;
  auto cold = BuildGuestSpec(Plan(), {"ls"}, in);
  auto ahead = BuildGuestSpecAhead(Plan(), in);
  ASSERT_TRUE(cold.ok() && ahead.ok());
  EXPECT_TRUE(ahead->request_later);
  EXPECT_TRUE(ahead->argv.empty());
  EXPECT_FALSE(ahead->has_stdin);
  GuestSpec same = *ahead;
  same.argv = {"ls"};
  same.has_stdin = true;
  same.request_later = false;
  EXPECT_EQ(EncodeSpec(same), EncodeSpec(*cold));
  EXPECT_FALSE(BuildGuestSpecAhead(
                   [] {
                     plan::Plan p = Plan();
                     p.limits.pids = 0;
                     return p;
                   }(),
                   Inputs())
                   .ok());
  auto request = BuildGuestRequest({"ls", "-l"}, true);
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->argv, (std::vector<std::string>{"ls", "-l"}));
  EXPECT_TRUE(request->has_stdin);
  EXPECT_FALSE(BuildGuestRequest({}, false).ok());
  EXPECT_FALSE(BuildGuestRequest({std::string("a\0b", 3)}, false).ok());
}

TEST(GuestSpecBuilderTest, EtcFilesMatchTheSandboxUser) {
  auto files = EtcFiles(65534, 65534, "");
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].first, "passwd");
  EXPECT_EQ(files[0].second,
            "root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n");
  EXPECT_EQ(files[1].second, "root:x:0:\nnogroup:x:65534:\n");
  EXPECT_EQ(files[2].first, "hosts");
  EXPECT_NE(files[2].second.find("127.0.0.1\tlocalhost"), std::string::npos);
  auto custom = EtcFiles(1000, 1000, "198.18.0.9\tpypi.org\n");
  EXPECT_EQ(custom[2].second, "198.18.0.9\tpypi.org\n");
  EXPECT_NE(custom[0].second.find("sandbox:x:1000:1000"), std::string::npos);
}

}  // namespace
}  // namespace safex::microvm
