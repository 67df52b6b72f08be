// A small plan that passes Verify with DefaultCeilings(); tests break one invariant at a time.
#pragma once

#include "common/sha256.h"
#include "plan/plan.h"

namespace safex::plan::testing {

inline Plan ValidPlan() {
  Plan p;
  p.policy_name = "unit";
  p.sources = {{"unit.policy", Sha256Hex("policy text")}};
  p.source_digest = Sha256Hex(p.sources[0].sha256);
  p.trust = Trust::kUntrusted;
  p.backend = Backend::kGvisor;
  p.limits = {
      30'000'000'000ULL, 20'000'000'000ULL, 512ULL << 20, 64, 256, 1ULL << 20, 64ULL << 20, 1};
  p.mounts.push_back({MountKind::kBind, "/usr", "/usr", true, 0, true, true, false});
  p.mounts.push_back({MountKind::kTmpfs, "/tmp", "", false, 64ULL << 20, true, true, true});
  p.mounts.push_back({MountKind::kInput, "/data/in", "", true, 0, true, true, true});
  p.mounts.push_back({MountKind::kOutput, "/data/out", "", false, 16ULL << 20, true, true, true});
  p.network.egress.push_back({"pypi.org", 443, Protocol::kTcp});
  p.env["PYTHONDONTWRITEBYTECODE"] = "1";
  p.seccomp.rules = {{"bpf", SyscallAction::kErrno, 1}, {"ptrace", SyscallAction::kKill, 1}};
  Validator out;
  out.target = ValidatorTarget::kStdout;
  out.max_bytes = 64 << 10;
  out.utf8 = true;
  out.regex.push_back({"AKIA[0-9A-Z]{16}", RegexAction::kReject, "[REDACTED]"});
  p.validators.push_back(out);
  Validator file;
  file.target = ValidatorTarget::kFile;
  file.path = "/data/out/result.json";
  file.max_bytes = 1 << 20;
  file.json = JsonRule{64, {{"answer", "integer"}}};
  p.validators.push_back(file);
  p.outputs = {16, 16ULL << 20};
  p.provenance["limits.memory_bytes"] = "unit.policy:3:5";
  return p;
}

}  // namespace safex::plan::testing
