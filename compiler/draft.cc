#include "compiler/draft.h"

#include <algorithm>
#include <type_traits>

namespace safex::compiler {
namespace {

std::string Idx(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

// Builds the plan and, alongside, the origin of every field it sets.
plan::Plan Build(const Draft& d, std::map<std::string, Origin>* origins) {
  plan::Plan p;
  auto note = [&](const std::string& field, const Origin& o) {
    if (origins) (*origins)[field] = o;
  };
  // A value some statement set, into its plan field, with that statement noted as its origin.
  auto take = [&note](const auto& set, auto& field, const char* name) {
    if (!set) return;
    field = static_cast<std::remove_reference_t<decltype(field)>>(set->value);
    note(name, set->origin);
  };
  p.policy_name = d.policy_name;
  if (d.trust) p.trust = d.trust->value, note("trust", d.trust->origin);
  if (d.backend) p.backend = d.backend->value, note("backend", d.backend->origin);
  if (d.gvisor_platform) {
    p.gvisor.platform = d.gvisor_platform->value;
    note("gvisor.platform", d.gvisor_platform->origin);
  }
  if (d.microvm_vcpus)
    p.microvm.vcpus = d.microvm_vcpus->value, note("microvm.vcpus", d.microvm_vcpus->origin);
  if (d.microvm_kvm)
    p.microvm.kvm = d.microvm_kvm->value, note("microvm.kvm", d.microvm_kvm->origin);

  struct F {
    const char* name;
    uint64_t* u64;
    uint32_t* u32;
  };
  F fields[] = {{"wall_time_ns", &p.limits.wall_time_ns, nullptr},
                {"cpu_time_ns", &p.limits.cpu_time_ns, nullptr},
                {"memory_bytes", &p.limits.memory_bytes, nullptr},
                {"pids", &p.limits.pids, nullptr},
                {"open_files", &p.limits.open_files, nullptr},
                {"output_bytes", &p.limits.output_bytes, nullptr},
                {"disk_bytes", &p.limits.disk_bytes, nullptr},
                {"cpus", nullptr, &p.limits.cpus}};
  for (const auto& f : fields) {
    auto it = d.limits.find(f.name);
    if (it == d.limits.end()) continue;
    if (f.u64)
      *f.u64 = it->second.value;
    else
      *f.u32 = static_cast<uint32_t>(it->second.value);
    note(std::string("limits.") + f.name, it->second.origin);
  }

  if (d.uid) p.process.uid = d.uid->value, note("process.uid", d.uid->origin);
  if (d.gid) p.process.gid = d.gid->value, note("process.gid", d.gid->origin);
  if (d.cwd) p.process.cwd = d.cwd->value, note("process.cwd", d.cwd->origin);

  for (const auto* list : {&d.rootfs, &d.mounts}) {
    for (const auto& m : *list) {
      note(Idx("mounts", p.mounts.size()), m.origin);
      p.mounts.push_back(m.value);
    }
  }
  for (const auto& e : d.egress) {
    note(Idx("network.egress", p.network.egress.size()), e.origin);
    p.network.egress.push_back(e.value);
  }
  // Sorted and unique: the plan's canonical form (verify.cc checks it).
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  if (d.caller_env)
    p.caller.env = sorted(d.caller_env->value), note("caller.env", d.caller_env->origin);
  if (d.container_images) {
    p.container.images = sorted(d.container_images->value);
    note("container.images", d.container_images->origin);
  }
  if (d.caller_cwd)
    p.caller.cwd = sorted(d.caller_cwd->value), note("caller.cwd", d.caller_cwd->origin);
  if (d.session) {
    // Defaults for what no statement of the chain set: 100 commands, 5 minutes idle, 1 hour.
    p.session = {true, 100, 300'000'000'000ull, 3600'000'000'000ull};
    note("session", d.session->origin);
    take(d.session_max_execs, p.session.max_execs, "session.max_execs");
    take(d.session_idle_timeout, p.session.idle_timeout_ns, "session.idle_timeout_ns");
    take(d.session_max_lifetime, p.session.max_lifetime_ns, "session.max_lifetime_ns");
  }
  for (const auto& [k, v] : d.env) {
    p.env[k] = v.value;
    note("env." + k, v.origin);
  }
  if (d.seccomp_default) {
    p.seccomp.default_action = d.seccomp_default->value;
    note("seccomp.default_action", d.seccomp_default->origin);
  }
  for (const auto& [name, r] : d.syscalls) {  // std::map: sorted by name, one rule per name
    note(Idx("seccomp.rules", p.seccomp.rules.size()), r.origin);
    p.seccomp.rules.push_back(r.value);
  }
  for (const auto& v : d.validators) {
    std::string base = Idx("validators", p.validators.size());
    note(base, v.origin);
    for (const auto& [f, o] : v.fields) note(base + "." + f, o);
    p.validators.push_back(v.v);
  }
  take(d.outputs_max_files, p.outputs.max_files, "outputs.max_files");
  take(d.outputs_max_total, p.outputs.max_total_bytes, "outputs.max_total_bytes");
  for (size_t i = 0; i < d.tests.size(); ++i) {
    p.tests.push_back(d.tests[i].value);
    note(Idx("tests", i), d.tests[i].origin);
  }
  if (origins) {
    for (const auto& [k, o] : *origins) p.provenance[k] = o.loc;
  }
  return p;
}

}  // namespace

plan::Plan Finalize(const Draft& d) {
  std::map<std::string, Origin> origins;
  return Build(d, &origins);
}

std::map<std::string, Origin> Origins(const Draft& d) {
  std::map<std::string, Origin> origins;
  Build(d, &origins);
  return origins;
}

}  // namespace safex::compiler
