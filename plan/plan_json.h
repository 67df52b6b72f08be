// The plan's canonical JSON and digest.
//
// Canonical form: UTF-8, objects with keys sorted bytewise, no insignificant whitespace, every
// field present (optional values as null), enums as their lowercase names, integers in decimal.
// Equal plans give byte-identical text, so the digest identifies a plan.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "plan/plan.h"

namespace safex::plan {

// The canonical JSON of `plan`, without "plan_digest". Never fails: a string that is not valid
// UTF-8 (which Verify refuses) has its bad bytes written as U+FFFD.
std::string ToCanonicalJson(const Plan& plan);

// SHA-256 (lowercase hex) of ToCanonicalJson(plan).
std::string PlanDigest(const Plan& plan);

// The canonical JSON with "plan_digest": PlanDigest(plan) added (as the other keys, in sorted
// position). What `safex compile` prints and what the supervisor reads.
std::string ToCanonicalJsonWithDigest(const Plan& plan);

// Strict reader: the input must be one JSON object of exactly the canonical shape (whitespace and
// key order are free). Unknown or missing fields, wrong types, out-of-range numbers, duplicate
// keys, invalid UTF-8, unknown enum names and trailing bytes are errors (InvalidArgument naming
// the field). When "plan_digest" is present it must equal PlanDigest of the result.
// Never throws. Does NOT verify the plan's invariants: call Verify for that.
Result<Plan> PlanFromJson(std::string_view json);

// Parsers for the enum names ToCanonicalJson writes (also used by the compiler).
std::optional<Trust> TrustFromName(std::string_view s);
std::optional<Backend> BackendFromName(std::string_view s);
std::optional<MountKind> MountKindFromName(std::string_view s);
std::optional<Protocol> ProtocolFromName(std::string_view s);
std::optional<SyscallAction> SyscallActionFromName(std::string_view s);
std::optional<ValidatorTarget> ValidatorTargetFromName(std::string_view s);
std::optional<KvmMode> KvmModeFromName(std::string_view s);
std::optional<OverflowAction> OverflowActionFromName(std::string_view s);
std::optional<ControlChars> ControlCharsFromName(std::string_view s);
std::optional<RegexAction> RegexActionFromName(std::string_view s);

const char* OverflowActionName(OverflowAction a);
const char* ControlCharsName(ControlChars c);
const char* RegexActionName(RegexAction a);

}  // namespace safex::plan
