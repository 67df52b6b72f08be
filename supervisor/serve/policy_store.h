// Policies by name for the daemon: a request's "python-untrusted" is the file
// <policy_dir>/python-untrusted.policy (names are [a-z0-9-]+, so they can name nothing else).
// Each is compiled once through supervisor::PreparePlan (compiled, re-read from its canonical
// JSON and verified against the host's ceilings) and kept until the policy directory changes:
// every lookup compares a fingerprint of the directory (name, inode, size, mtime, ctime of each
// *.policy) with the one the cache was built under, so an edit of a policy or of a parent it
// `extends` is seen by the next request. Thread-safe; concurrent first requests for one policy
// compile it once (the others wait for that compilation rather than repeating it).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "plan/ceilings.h"
#include "supervisor/runner.h"

namespace safex::serve {

class PolicyStore {
 public:
  PolicyStore(std::string policy_dir, plan::Ceilings ceilings)
      : dir_(std::move(policy_dir)), ceilings_(std::move(ceilings)) {}

  // NotFound when there is no such policy file. Any other failure (it does not compile, its plan
  // is refused, the file declares another name) is a refusal described in *report (which also
  // gets the policy's name and digests when known).
  Result<std::shared_ptr<const supervisor::PreparedPlan>> Get(const std::string& name,
                                                              supervisor::RunReport* report);

  // Compilations done so far (for tests and metrics).
  uint64_t compilations() const;

 private:
  std::string Fingerprint() const;

  const std::string dir_;
  const plan::Ceilings ceilings_;
  mutable std::mutex mu_;
  std::string fingerprint_;                                                       // guarded by mu_
  std::map<std::string, std::shared_ptr<const supervisor::PreparedPlan>> cache_;  // guarded
  // One mutex per policy name, held while that policy compiles (guarded by mu_; never erased:
  // only names that had a policy file get one).
  std::map<std::string, std::shared_ptr<std::mutex>> compiling_;
  uint64_t compilations_ = 0;  // guarded by mu_
};

}  // namespace safex::serve
