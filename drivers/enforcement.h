// What a run enforced, read back after set-up and before the program starts (docs/audit.md,
// "Evidence"): each field with where it was read from, what the plan asks for, and what was
// seen. Nothing is copied from the plan and called a read-back: a field the backend cannot
// observe says so, and names the built-in probe (`safex test --builtin`) that tests the claim
// instead. A field that differs from the plan refuses the run before its program starts.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace safex::drivers {

struct EnforcedField {
  enum class State {
    kMatches,      // read back, and what the plan asks for
    kDiffers,      // read back, and not what the plan asks for: the run is refused
    kObserved,     // read back; the plan names no value to compare it with (a version, a digest)
    kNotObserved,  // this backend cannot show it to the host; `probe` tests it instead
  };
  std::string name;  // "cgroup.memory", "runtime", "network.addresses", "seccomp", ...
  State state = State::kNotObserved;
  std::string expected;  // what the plan implies ("" when it implies nothing comparable)
  std::string observed;  // what was read ("" when not observed)
  std::string source;    // "host kernel: /sys/fs/cgroup/...", "runtime: runsc --version", ...
  std::string probe;     // kNotObserved: the built-in probe that tests the claim
};

struct Enforcement {
  std::vector<EnforcedField> fields;

  void Add(EnforcedField f) { fields.push_back(std::move(f)); }
  // A read-back compared with the plan: kMatches or kDiffers.
  void Compare(std::string name, std::string expected, std::string observed, std::string source);
  void Observed(std::string name, std::string observed, std::string source);
  void NotObserved(std::string name, std::string why, std::string probe);

  bool Differs() const;
  // "cgroup.memory: the plan asks for 268435456, the kernel enforces 67108864 (...); ..."
  std::string Differences() const;
};

const char* EnforcedStateName(EnforcedField::State s);  // matches, differs, observed, not-observed

inline void Enforcement::Compare(std::string name, std::string expected, std::string observed,
                                 std::string source) {
  EnforcedField f;
  f.state = expected == observed ? EnforcedField::State::kMatches : EnforcedField::State::kDiffers;
  f.name = std::move(name);
  f.expected = std::move(expected);
  f.observed = std::move(observed);
  f.source = std::move(source);
  fields.push_back(std::move(f));
}

inline void Enforcement::Observed(std::string name, std::string observed, std::string source) {
  EnforcedField f;
  f.state = EnforcedField::State::kObserved;
  f.name = std::move(name);
  f.observed = std::move(observed);
  f.source = std::move(source);
  fields.push_back(std::move(f));
}

inline void Enforcement::NotObserved(std::string name, std::string why, std::string probe) {
  EnforcedField f;
  f.state = EnforcedField::State::kNotObserved;
  f.name = std::move(name);
  f.source = std::move(why);
  f.probe = std::move(probe);
  fields.push_back(std::move(f));
}

inline bool Enforcement::Differs() const {
  for (const EnforcedField& f : fields) {
    if (f.state == EnforcedField::State::kDiffers) return true;
  }
  return false;
}

inline std::string Enforcement::Differences() const {
  std::string out;
  for (const EnforcedField& f : fields) {
    if (f.state != EnforcedField::State::kDiffers) continue;
    if (!out.empty()) out += "; ";
    out += f.name + ": the plan asks for " + f.expected + ", " + f.source + " shows " +
           (f.observed.empty() ? "nothing" : f.observed);
  }
  return out;
}

inline const char* EnforcedStateName(EnforcedField::State s) {
  switch (s) {
    case EnforcedField::State::kMatches:
      return "matches";
    case EnforcedField::State::kDiffers:
      return "differs";
    case EnforcedField::State::kObserved:
      return "observed";
    case EnforcedField::State::kNotObserved:
      return "not-observed";
  }
  return "not-observed";
}

}  // namespace safex::drivers
