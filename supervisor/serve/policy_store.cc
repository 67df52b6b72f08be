#include "supervisor/serve/policy_store.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "supervisor/serve/submit_request.h"

namespace safex::serve {

std::string PolicyStore::Fingerprint() const {
  std::vector<std::string> names;
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return "unreadable:" + std::to_string(errno);
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 7 && n.ends_with(".policy")) names.push_back(std::move(n));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  std::string fp;
  for (const std::string& n : names) {
    struct stat st {};
    if (stat((dir_ + "/" + n).c_str(), &st) != 0) continue;
    fp += n + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
          std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
          std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec) + "\n";
  }
  return fp;
}

uint64_t PolicyStore::compilations() const {
  std::lock_guard<std::mutex> l(mu_);
  return compilations_;
}

Result<std::shared_ptr<const supervisor::PreparedPlan>> PolicyStore::Get(
    const std::string& name, supervisor::RunReport* report) {
  if (!ValidPolicyName(name)) return Status::InvalidArgument("invalid policy name");
  const std::string path = dir_ + "/" + name + ".policy";
  std::string fp = Fingerprint();
  auto cached = [&]() -> std::shared_ptr<const supervisor::PreparedPlan> {
    // REQUIRES: mu_ held.
    if (fp != fingerprint_) {
      cache_.clear();
      fingerprint_ = fp;
    }
    auto it = cache_.find(name);
    if (it == cache_.end()) return nullptr;
    report->policy_name = it->second->plan.policy_name;
    report->policy_source_digest = it->second->plan.source_digest;
    report->plan_digest = it->second->digest;
    return it->second;
  };
  // Checked before a name gets a compile mutex, so that requests naming no policy add nothing.
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::NotFound("no policy named \"" + name + "\"");
  }
  std::shared_ptr<std::mutex> name_mu;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto hit = cached()) return hit;
    auto& m = compiling_[name];
    if (!m) m = std::make_shared<std::mutex>();
    name_mu = m;
  }
  // Single flight: whoever holds the name's mutex compiles; the others find its result cached.
  // Other policies compile meanwhile (mu_ is not held).
  std::lock_guard<std::mutex> compiling(*name_mu);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (fp == fingerprint_) {
      if (auto hit = cached()) return hit;
    }
  }
  auto prepared = supervisor::PreparePlan(path, {dir_}, ceilings_, report);
  {
    std::lock_guard<std::mutex> l(mu_);
    ++compilations_;
  }
  if (!prepared.ok()) return prepared.status();
  if (prepared->plan.policy_name != name) {
    report->reason = "policy file " + name + ".policy declares policy \"" +
                     prepared->plan.policy_name + "\"; the names must match";
    return Status::FailedPrecondition(report->reason);
  }
  auto shared = std::make_shared<const supervisor::PreparedPlan>(std::move(prepared).value());
  std::lock_guard<std::mutex> l(mu_);
  // Cached only if the directory did not change while it compiled.
  if (fp == fingerprint_ && Fingerprint() == fp) cache_[name] = shared;
  return std::shared_ptr<const supervisor::PreparedPlan>(shared);
}

}  // namespace safex::serve
