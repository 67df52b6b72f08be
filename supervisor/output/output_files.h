// The supervisor's side of output files: collect each output mount of a run (as the driver's
// OutputCollector, after every process is gone), validate every collected file like a stream,
// and write the accepted ones to the caller's destination. Rules: collect.h.
//
// Usage:
//   OutputFiles files(validator_set, plan.outputs);
//   request.collect_output = [&files](const plan::Mount& m, int dirfd) { files.Collect(m, dirfd);
//   };
//   ... driver->Run(plan, request) ...
//   if (files.rejected()) -> verdict validator-rejected, files.rejection()->Summary()
//   else files.WriteAccepted(dest_dirfd)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "plan/plan.h"
#include "supervisor/output/collect.h"
#include "supervisor/output/delivery.h"
#include "supervisor/output/stream_validator.h"

namespace safex::output {

class OutputFiles {
 public:
  // `validators` must outlive this object.
  OutputFiles(const ValidatorSet& validators, plan::OutputCollection caps,
              CollectOptions options = {});

  // Collects and validates the files of one kOutput mount. `dirfd` is not kept. Caps
  // (plan.outputs) count across every call. Thread-compatible (one run, one thread).
  void Collect(const plan::Mount& mount, int dirfd);

  struct File {
    std::string mount_target;
    std::string relative_path;  // raw bytes of the name: escape before logging
    std::string sandbox_path;   // raw
    uint64_t size = 0;          // st_size when collected
    std::string read_sha256;    // SHA-256 of what was read (report.raw_sha256 too)
    ValidationReport report;    // report.delivered: what the caller receives
  };

  // Whether any file was refused or rejected by a validator (verdict validator-rejected).
  bool rejected() const { return rejection_.has_value(); }
  // The first rejection, in collection order (null if none).
  const Finding* rejection() const { return rejection_ ? &*rejection_ : nullptr; }
  const std::vector<File>& files() const { return files_; }
  const std::vector<Refusal>& refusals() const { return refusals_; }
  // One "collect" finding per refusal (check "collect", outcome rejected), in order.
  const std::vector<Finding>& refusal_findings() const { return refusal_findings_; }
  // Declared literal paths (sandbox paths, raw) that the program did not create.
  const std::vector<std::string>& absent() const { return absent_; }
  bool used_fallback() const { return used_fallback_; }

  // Writes every file that passed validation (report not rejected) below dest_dirfd, creating
  // directories as needed, never following symlinks and never overwriting (collect.h,
  // WriteFileBeneath). Layout: the path relative to the mount's root when the run had one output
  // mount; with several, "<mount target without the leading '/'>/<relative path>".
  // The caller decides whether to call it at all when rejected() (the supervisor does not).
  Status WriteAccepted(int dest_dirfd, const WriteOptions& options = {}) const;

  // The same, all or nothing (delivery.h): every destination name is checked before any file is
  // written, and what was written is removed again on failure. The returned Delivery can be
  // rolled back later (the run's end event could not be recorded).
  Result<Delivery> Deliver(int dest_dirfd, const DeliveryOptions& options = {}) const;

 private:
  std::string DestinationOf(const File& f) const;

  const ValidatorSet& validators_;
  plan::OutputCollection caps_;
  CollectOptions options_;
  CollectBudget budget_;
  std::vector<std::string> mounts_;
  std::vector<File> files_;
  std::vector<Refusal> refusals_;
  std::vector<Finding> refusal_findings_;
  std::vector<std::string> absent_;
  std::optional<Finding> rejection_;
  bool used_fallback_ = false;
};

}  // namespace safex::output
