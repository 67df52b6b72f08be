// The policy being built, layer by layer (root ancestor first, the compiled policy last). Keeps,
// for every value, the "file:line:col" of the statement that set it; Finalize() turns it into a
// plan whose provenance names those locations by plan field path.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dsl/ast.h"
#include "plan/plan.h"

namespace safex::compiler {

// Where a value came from: "file:line:col", and the exact span for carets.
struct Origin {
  std::string loc;
  std::string path;
  dsl::Span span;
};

template <typename T>
struct Set {
  T value{};
  Origin origin;
};

struct DraftValidator {
  plan::Validator v;
  Origin origin;
  std::map<std::string, Origin> fields;  // "max_bytes", "regex[0]", ... -> origin
};

struct Draft {
  Origin head;  // the compiled policy's `policy` statement (diagnostics without a better place)
  std::string policy_name;

  std::optional<Set<plan::Trust>> trust;
  std::optional<Set<plan::Backend>> backend;
  std::optional<Set<std::string>> gvisor_platform;
  std::optional<Set<uint32_t>> microvm_vcpus;
  std::optional<Set<plan::KvmMode>> microvm_kvm;

  // limits.<plan field name> -> value
  std::map<std::string, Set<uint64_t>> limits;

  std::optional<Set<uint32_t>> uid, gid;
  std::optional<Set<std::string>> cwd;

  std::vector<Set<plan::Mount>> rootfs;  // host_readonly binds, in listed order
  std::vector<Set<plan::Mount>> mounts;  // the other mounts, by first appearance of the target

  std::vector<Set<plan::EgressRule>> egress;
  std::map<std::string, Set<std::string>> env;
  // `caller { env = [...] cwd = [...] }`: what a caller of the service may choose per run.
  std::optional<Set<std::vector<std::string>>> caller_env, caller_cwd;
  // `container { images = [...] }`: the images safex-oci may run this policy's containers from.
  std::optional<Set<std::vector<std::string>>> container_images;
  // `session { max_execs = 100  idle_timeout = 5m  max_lifetime = 1h }`: sessions allowed (the
  // block was written, here or in an ancestor), each bound from its closest statement.
  std::optional<Set<bool>> session;
  std::optional<Set<uint64_t>> session_max_execs, session_idle_timeout, session_max_lifetime;

  std::optional<Set<plan::SyscallAction>> seccomp_default;
  std::map<std::string, Set<plan::SyscallRule>> syscalls;

  std::vector<DraftValidator> validators;
  std::optional<Set<uint64_t>> outputs_max_files, outputs_max_total;

  // The tests, inherited ones first, each with the statement that (last) defined it.
  std::vector<Set<plan::PolicyTest>> tests;

  // Required keys that were written, even if their value had an error: a bad value is reported
  // once, not again as "missing". "trust", "isolation", "limits.memory", "outputs.max_files", ...
  std::set<std::string> mentioned;
};

// The plan as the draft stands (missing values are zero / defaults). `sources` and digests are
// filled by the caller.
plan::Plan Finalize(const Draft& d);

// Field path -> origin, for every field Finalize() names in provenance.
std::map<std::string, Origin> Origins(const Draft& d);

}  // namespace safex::compiler
