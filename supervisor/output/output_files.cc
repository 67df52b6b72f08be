#include "supervisor/output/output_files.h"

#include <utility>

namespace safex::output {

OutputFiles::OutputFiles(const ValidatorSet& validators, plan::OutputCollection caps,
                         CollectOptions options)
    : validators_(validators), caps_(caps), options_(std::move(options)) {}

void OutputFiles::Collect(const plan::Mount& mount, int dirfd) {
  MountCollection mc = CollectMount(dirfd, mount, validators_, caps_, &budget_, options_);
  mounts_.push_back(mc.mount_target);
  used_fallback_ = used_fallback_ || mc.used_fallback;
  for (Refusal& r : mc.refusals) {
    Finding f;
    f.subject = r.path;
    const bool caps = r.reason == RefusalReason::kTooMany ||
                      r.reason == RefusalReason::kTotalTooBig ||
                      r.reason == RefusalReason::kWalkLimit || r.validators.empty();
    f.validator_index = caps ? kOutputsBlock : r.validators.front();
    f.validator =
        caps ? "outputs" : ValidatorDisplayName(validators_.validators()[r.validators.front()]);
    f.check = "collect";
    f.outcome = CheckOutcome::kRejected;
    f.detail = std::string("refused (") + RefusalReasonName(r.reason) + "): " + r.detail;
    if (!rejection_) rejection_ = f;
    refusal_findings_.push_back(std::move(f));
    refusals_.push_back(std::move(r));
  }
  for (std::string& a : mc.absent) absent_.push_back(std::move(a));
  for (CollectedFile& cf : mc.files) {
    File file;
    file.mount_target = mc.mount_target;
    file.relative_path = std::move(cf.relative_path);
    file.sandbox_path = std::move(cf.sandbox_path);
    file.size = cf.size;
    file.read_sha256 = std::move(cf.sha256);
    file.report =
        validators_.ValidateFile(file.sandbox_path, cf.validators, cf.bytes, cf.size, cf.truncated);
    std::string().swap(cf.bytes);  // only what is delivered is kept
    if (file.report.rejected && !rejection_) rejection_ = *file.report.rejection();
    files_.push_back(std::move(file));
  }
}

// Where a file goes below the destination: its path relative to the mount's root when the run had
// one output mount; with several, "<mount target without the leading '/'>/<relative path>".
std::string OutputFiles::DestinationOf(const File& f) const {
  if (mounts_.size() <= 1) return f.relative_path;
  const std::string target = f.mount_target == "/" ? "" : f.mount_target.substr(1);
  return target.empty() ? f.relative_path : target + "/" + f.relative_path;
}

Status OutputFiles::WriteAccepted(int dest_dirfd, const WriteOptions& options) const {
  for (const File& f : files_) {
    if (f.report.rejected) continue;
    SAFEX_RETURN_IF_ERROR(
        WriteFileBeneath(dest_dirfd, DestinationOf(f), f.report.delivered, options));
  }
  return Status::Ok();
}

Result<Delivery> OutputFiles::Deliver(int dest_dirfd, const DeliveryOptions& options) const {
  std::vector<DeliveryItem> items;
  for (const File& f : files_) {
    if (!f.report.rejected) items.push_back({DestinationOf(f), f.report.delivered});
  }
  return Delivery::Write(dest_dirfd, items, options);
}

}  // namespace safex::output
