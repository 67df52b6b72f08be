// safex-oci's pure parts: the spec parsed and checked against a plan, the node's choice of
// policy, container ids and cgroup paths, and the host config's `oci` section.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/host_config.h"
#include "supervisor/oci/container_spec.h"
#include "supervisor/oci/container_state.h"
#include "supervisor/oci/policy_choice.h"
#include "supervisor/oci/spec_check.h"

namespace safex::supervisor::oci {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// An ordinary container as `ctr run` writes it: new namespaces, the default capabilities, the
// default mounts, no devices.
nlohmann::json OrdinarySpec() {
  nlohmann::json caps = DefaultContainerCapabilities();
  return {{"ociVersion", "1.0.2"},
          {"process",
           {{"args", {"/bin/echo", "hi"}},
            {"env", {"PATH=/usr/bin:/bin", "LANG=C"}},
            {"cwd", "/"},
            {"user", {{"uid", 0}, {"gid", 0}}},
            {"capabilities", {{"bounding", caps}, {"effective", caps}, {"permitted", caps}}}}},
          {"root", {{"path", "rootfs"}, {"readonly", false}}},
          {"mounts",
           {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
            {{"destination", "/dev"}, {"type", "tmpfs"}, {"source", "tmpfs"}}}},
          {"linux",
           {{"namespaces",
             {{{"type", "pid"}},
              {{"type", "ipc"}},
              {{"type", "uts"}},
              {{"type", "mount"}},
              {{"type", "network"}}}},
            {"cgroupsPath", "/default/t1"},
            {"resources", {{"devices", {{{"allow", false}, {"access", "rwm"}}}}}}}},
          {"annotations", {{"safex.dev/policy", "python-untrusted"}}}};
}

ContainerSpec Parsed(const nlohmann::json& j) {
  auto s = ParseContainerSpec(j.dump());
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : ContainerSpec{};
}

plan::Plan Plan() {
  plan::Plan p;
  p.limits.memory_bytes = 512ull << 20;
  p.limits.pids = 64;
  p.limits.cpus = 1;
  p.process.cwd = "/tmp";
  p.caller.env = {"LANG"};
  p.mounts.push_back({plan::MountKind::kBind, "/usr", "/usr", true});
  return p;
}

bool NeverHost(const std::string&, const std::string&) { return false; }

SpecCheck Check(const nlohmann::json& j) { return CheckSpec(Parsed(j), Plan(), NeverHost); }

std::string Lines(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& line : v) out += line + "\n";
  return out;
}

TEST(ContainerSpecCheckTest, AnOrdinaryContainerIsAcceptedAndWhatThePolicyDecidesIsSaid) {
  SpecCheck c = Check(OrdinarySpec());
  EXPECT_THAT(c.refusals, IsEmpty());
  EXPECT_EQ(c.env, (std::map<std::string, std::string>{{"LANG", "C"}}));
  EXPECT_EQ(c.env_not_passed, std::vector<std::string>{"PATH"});
  EXPECT_EQ(c.cwd, "");  // "/" is not a directory the plan lets a caller choose
  const std::string notes = Lines(c.notes);
  EXPECT_THAT(notes, HasSubstr("user 0: the policy's uid"));
  EXPECT_THAT(notes, HasSubstr("capabilities: none are granted"));
  EXPECT_THAT(notes, HasSubstr("seccomp: the policy's filter applies"));
}

TEST(ContainerSpecCheckTest, PrivilegedAndAddedCapabilitiesAreRefused) {
  nlohmann::json j = OrdinarySpec();
  j["process"]["capabilities"]["bounding"].push_back("CAP_SYS_ADMIN");
  EXPECT_THAT(Check(j).refusals.at(0), HasSubstr("adds capabilities beyond a container's default: "
                                                 "CAP_SYS_ADMIN"));
  for (const char* cap : {"CAP_SYS_PTRACE", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_BOOT",
                          "CAP_NET_ADMIN", "CAP_SYS_TIME", "CAP_MAC_ADMIN", "CAP_BPF"}) {
    j["process"]["capabilities"]["effective"].push_back(cap);
  }
  EXPECT_THAT(Check(j).refusals.at(0), HasSubstr("is privileged"));
}

TEST(ContainerSpecCheckTest, HostNamespacesAreRefused) {
  nlohmann::json j = OrdinarySpec();
  j["linux"]["namespaces"].erase(4);  // network: ctr run --net-host
  EXPECT_THAT(Check(j).refusals.at(0), HasSubstr("host network"));
  j = OrdinarySpec();
  j["linux"]["namespaces"][0]["path"] = "/proc/1/ns/pid";
  auto host = [](const std::string& type, const std::string& path) {
    return type == "pid" && path == "/proc/1/ns/pid";
  };
  SpecCheck c = CheckSpec(Parsed(j), Plan(), host);
  EXPECT_THAT(c.refusals.at(0), HasSubstr("joins the host's pid namespace"));
  // A pod's own network namespace (kubelet's CNI) is joined by path: accepted, said.
  j = OrdinarySpec();
  j["linux"]["namespaces"][4]["path"] = "/var/run/netns/cni-1234";
  c = Check(j);
  EXPECT_THAT(c.refusals, IsEmpty());
  EXPECT_THAT(c.notes.front(), HasSubstr("joins the pod's network namespace"));
}

TEST(ContainerSpecCheckTest, RealNamespaceFilesAreCompared) {
  EXPECT_TRUE(IsHostNamespaceFile("network", "/proc/self/ns/net"));
  EXPECT_TRUE(IsHostNamespaceFile("network", "/proc/" + std::to_string(getpid()) + "/ns/net"));
  EXPECT_TRUE(IsHostNamespaceFile("network", "/nonexistent/ns"));  // unreadable: not trusted
  EXPECT_FALSE(IsHostNamespaceFile("user", "/proc/1/ns/user"));    // not one that is checked
}

TEST(ContainerSpecCheckTest, DevicesTerminalsAndHostMountsAreRefused) {
  nlohmann::json j = OrdinarySpec();
  j["linux"]["devices"] = {{{"path", "/dev/kvm"}, {"type", "c"}, {"major", 10}, {"minor", 232}}};
  EXPECT_THAT(Check(j).refusals.at(0), HasSubstr("adds devices (/dev/kvm)"));
  j = OrdinarySpec();
  j["process"]["terminal"] = true;
  EXPECT_THAT(Check(j).refusals.at(0), HasSubstr("terminal"));
  j = OrdinarySpec();
  j["mounts"].push_back(
      {{"destination", "/host"}, {"type", "bind"}, {"source", "/"}, {"options", {"rbind", "rw"}}});
  EXPECT_THAT(Check(j).refusals.at(0),
              HasSubstr("binds host path / at /host, which the policy does not mount"));
  // The policy's own bind of the same path is fine; a bind written as options only is a bind.
  j = OrdinarySpec();
  j["mounts"].push_back({{"destination", "/usr"}, {"source", "/usr"}, {"options", {"rbind"}}});
  EXPECT_THAT(Check(j).refusals, IsEmpty());
}

TEST(ContainerSpecCheckTest, WhatKubeletAlwaysAddsIsTreatedAsDocumented) {
  nlohmann::json j = OrdinarySpec();
  for (const char* dst : {"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/dev/shm",
                          "/var/run/secrets/kubernetes.io/serviceaccount"}) {
    j["mounts"].push_back({{"destination", dst},
                           {"type", "bind"},
                           {"source", std::string("/var/lib/kubelet/pods/x") + dst},
                           {"options", {"rbind", "ro"}}});
  }
  j["mounts"].push_back({{"destination", "/dev/termination-log"},
                         {"type", "bind"},
                         {"source", "/var/lib/kubelet/pods/x/containers/c/1234"},
                         {"options", {"rbind", "rw"}}});
  SpecCheck c = Check(j);
  EXPECT_THAT(c.refusals, IsEmpty());
  EXPECT_EQ(c.termination_log, "/var/lib/kubelet/pods/x/containers/c/1234");
  const std::string notes = Lines(c.notes);
  EXPECT_THAT(notes, HasSubstr("/var/run/secrets/kubernetes.io/serviceaccount: kept out"));
  EXPECT_THAT(notes, HasSubstr("/etc/resolv.conf: not bound"));
  EXPECT_THAT(notes, HasSubstr("/dev/shm: not bound"));
}

TEST(ContainerSpecCheckTest, LimitsAboveThePolicysAreRefused) {
  nlohmann::json j = OrdinarySpec();
  j["linux"]["resources"]["memory"] = {{"limit", 1ll << 30}};
  j["linux"]["resources"]["pids"] = {{"limit", 1000}};
  j["linux"]["resources"]["cpu"] = {{"quota", 200000}, {"period", 100000}};
  SpecCheck c = Check(j);
  ASSERT_EQ(c.refusals.size(), 3u);
  EXPECT_THAT(c.refusals[0], HasSubstr("memory limit (1073741824 bytes) is above"));
  EXPECT_THAT(c.refusals[1], HasSubstr("pids limit (1000)"));
  EXPECT_THAT(c.refusals[2], HasSubstr("CPU quota"));
  // Lower limits are within the policy (kubelet's pod cgroup above enforces them too).
  j["linux"]["resources"]["memory"]["limit"] = 64 << 20;
  j["linux"]["resources"]["pids"]["limit"] = 32;
  j["linux"]["resources"]["cpu"]["quota"] = 50000;
  EXPECT_THAT(Check(j).refusals, IsEmpty());
}

TEST(ContainerSpecCheckTest, ThePolicysImageListIsChecked) {
  plan::Plan p = Plan();
  p.container.images = {"docker.io/library/python:3.12", "registry.example.com/agents/*"};
  nlohmann::json j = OrdinarySpec();
  EXPECT_THAT(CheckSpec(Parsed(j), p, NeverHost).refusals.at(0),
              HasSubstr("the container's image is not named"));
  for (const char* ok : {"docker.io/library/python:3.12", "registry.example.com/agents/a:1"}) {
    j["annotations"]["io.kubernetes.cri.image-name"] = ok;
    EXPECT_THAT(CheckSpec(Parsed(j), p, NeverHost).refusals, IsEmpty()) << ok;
  }
  for (const char* bad : {"docker.io/library/python:3.13", "registry.example.com/agentsx/a",
                          "registry.example.com/agents"}) {
    j["annotations"]["io.kubernetes.cri.image-name"] = bad;
    EXPECT_THAT(CheckSpec(Parsed(j), p, NeverHost).refusals.at(0),
                HasSubstr(std::string("image ") + bad + " is not one the policy allows"));
  }
}

TEST(ContainerSpecCheckTest, MalformedSpecsAreErrorsNotCrashes) {
  EXPECT_FALSE(ParseContainerSpec("").ok());
  EXPECT_FALSE(ParseContainerSpec("[]").ok());
  EXPECT_FALSE(ParseContainerSpec(R"({"process": {"args": []}})").ok());
  EXPECT_FALSE(ParseContainerSpec(R"({"process": {"args": "x"}})").ok());
  EXPECT_FALSE(ParseContainerSpec(R"({"process": {"args": ["x"]}, "mounts": [{}]})").ok());
  auto s = ParseContainerSpec(R"({"process": {"args": ["x"]}, "unknown": 1})");
  EXPECT_TRUE(s.ok());
}

compiler::OciSettings Node() {
  compiler::OciSettings oci;
  oci.present = true;
  oci.namespaces = {{"agents", {"python-untrusted", "shell-untrusted"}, "python-untrusted"},
                    {"ci", {"compile-and-test"}, ""},
                    {"*", {"shell-untrusted"}, "shell-untrusted"}};
  return oci;
}

ContainerSpec InNamespace(const std::string& ns, const std::string& policy) {
  ContainerSpec s;
  if (!ns.empty()) s.annotations["io.kubernetes.cri.sandbox-namespace"] = ns;
  if (!policy.empty()) s.annotations[kPolicyAnnotation] = policy;
  return s;
}

TEST(ContainerSpecCheckTest, ThePodsIdentityComesFromTheCriAnnotations) {
  nlohmann::json j = OrdinarySpec();
  j["annotations"]["io.kubernetes.cri.sandbox-namespace"] = "agents";
  j["annotations"]["io.kubernetes.cri.sandbox-name"] = "task-1";
  j["annotations"]["io.kubernetes.cri.container-name"] = "task";
  j["annotations"]["io.kubernetes.cri.image-name"] = "registry.example.com/agents/a:1";
  j["annotations"]["io.kubernetes.cri.container-type"] = "container";
  j["annotations"]["io.kubernetes.cri.sandbox-id"] = "abc123";
  PodIdentity p = PodIdentityOf(Parsed(j));
  EXPECT_EQ(p.kube_namespace, "agents");
  EXPECT_EQ(p.pod, "task-1");
  EXPECT_EQ(p.container, "task");
  EXPECT_EQ(p.image, "registry.example.com/agents/a:1");
  EXPECT_EQ(p.sandbox_id, "abc123");
  EXPECT_FALSE(p.IsPodSandbox());
  j["annotations"]["io.kubernetes.cri.container-type"] = "sandbox";
  EXPECT_TRUE(PodIdentityOf(Parsed(j)).IsPodSandbox());
}

TEST(OciPolicyChoiceTest, TheNamespaceDecidesThePodOnlyPicksWithin) {
  EXPECT_EQ(*ChoosePolicy(Node(), InNamespace("agents", "")), "python-untrusted");
  EXPECT_EQ(*ChoosePolicy(Node(), InNamespace("agents", "shell-untrusted")), "shell-untrusted");
  auto refused = ChoosePolicy(Node(), InNamespace("agents", "compile-and-test"));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("\"compile-and-test\" is not allowed for namespace agents; it may use: "
                        "python-untrusted, shell-untrusted"));
  // No default: the pod must name one.
  EXPECT_THAT(ChoosePolicy(Node(), InNamespace("ci", "")).status().message(),
              HasSubstr("names no policy"));
  // Other namespaces and plain ctr fall under "*".
  EXPECT_EQ(*ChoosePolicy(Node(), InNamespace("other", "")), "shell-untrusted");
  EXPECT_EQ(*ChoosePolicy(Node(), InNamespace("", "")), "shell-untrusted");
  EXPECT_FALSE(ChoosePolicy(Node(), InNamespace("", "python-untrusted")).ok());
}

TEST(OciPolicyChoiceTest, WithoutAnOciSectionOrARuleNothingRuns) {
  EXPECT_THAT(ChoosePolicy(compiler::OciSettings{}, InNamespace("agents", "")).status().message(),
              HasSubstr("no `oci` section"));
  compiler::OciSettings oci = Node();
  oci.namespaces.pop_back();  // no "*"
  EXPECT_THAT(ChoosePolicy(oci, InNamespace("other", "")).status().message(),
              HasSubstr("no policy is allowed for namespace other"));
}

TEST(OciStateTest, IdsAndCgroupPaths) {
  EXPECT_TRUE(CheckContainerId("t1").ok());
  EXPECT_TRUE(CheckContainerId(std::string(64, 'a')).ok());
  for (const char* bad : {"", ".", "..", "a/b", "a b", "../x"}) {
    EXPECT_FALSE(CheckContainerId(bad).ok()) << bad;
  }
  EXPECT_EQ(*CgroupParentOf("/default/t1"), "default/t1");
  EXPECT_EQ(*CgroupParentOf("/kubepods/burstable/pod1234/abcd"), "kubepods/burstable/pod1234/abcd");
  EXPECT_EQ(*CgroupParentOf(""), "");
  EXPECT_THAT(CgroupParentOf("kubepods-pod1.slice:cri-containerd:abcd").status().message(),
              HasSubstr("systemd"));
  EXPECT_FALSE(CgroupParentOf("/default/../../etc").ok());
}

TEST(OciStateTest, TheStateOfARecordFollowsItsMonitor) {
  ContainerRecord r{"t1", "/b", getpid(), ProcessStartTime(getpid()), "now", "", {}};
  EXPECT_TRUE(MonitorAlive(r));
  EXPECT_EQ(StatusOf("/nonexistent", r), ContainerStatus::kCreated);
  r.pid_start += 1;  // the pid was reused by another process
  EXPECT_FALSE(MonitorAlive(r));
  EXPECT_EQ(StateJson(r, StatusOf("/nonexistent", r))["status"], "stopped");
}

TEST(OciHostConfigTest, TheOciSectionParses) {
  compiler::HostConfig h;
  std::vector<dsl::Diagnostic> diags;
  ASSERT_TRUE(compiler::ParseHostConfig("host.policy", R"(host {
  oci {
    policy_dir = "/etc/safex/k8s-policies"
    audit_db = "/var/lib/safex/oci.db"
    namespace "agents" { policies = ["python-untrusted", "shell-untrusted"]  default = "python-untrusted" }
    namespace "*" { policies = ["shell-untrusted"] }
  }
})",
                                        &h, &diags));
  EXPECT_TRUE(h.oci.present);
  EXPECT_EQ(h.oci.policy_dir, "/etc/safex/k8s-policies");
  EXPECT_EQ(h.oci.audit_db, "/var/lib/safex/oci.db");
  ASSERT_EQ(h.oci.namespaces.size(), 2u);
  EXPECT_EQ(h.oci.namespaces[0].default_policy, "python-untrusted");
  EXPECT_EQ(h.oci.namespaces[1].name, "*");
}

TEST(OciHostConfigTest, MistakesAreDiagnosed) {
  for (
      const char* bad : {
          R"(host { oci { namespace "Agents" { policies = ["a"] } } })",
          R"(host { oci { namespace "a" { policies = ["a"]  default = "b" } } })",
          R"(host { oci { namespace "a" { } } })",
          R"(host { oci { namespace "a" { policies = ["A b"] } } })",
          R"(host { oci { namespace "a" { policies = ["a"] } namespace "a" { policies = ["a"] } } })",
          R"(host { oci { state_dir = "relative" } })",
          R"(host { oci { polcy_dir = "/x" } })",
      }) {
    compiler::HostConfig h;
    std::vector<dsl::Diagnostic> diags;
    EXPECT_FALSE(compiler::ParseHostConfig("host.policy", bad, &h, &diags)) << bad;
    EXPECT_FALSE(diags.empty()) << bad;
  }
}

}  // namespace
}  // namespace safex::supervisor::oci
