#include "compiler/values.h"

#include <cerrno>

#include "dsl/parser.h"

namespace safex::compiler {

void Diags::Error(const char* code, const dsl::Span& span, std::string message, std::string help) {
  ++errors_;
  if (errors_ > kMaxDiagnostics) return;  // hostile input: the first ones say enough
  if (errors_ == kMaxDiagnostics) {
    message = "too many errors; stopping here (" + message + ")";
  }
  out_->push_back(dsl::Diagnostic{dsl::Severity::kError, code, std::move(message), path_, span,
                                  std::move(help)});
}

void Diags::Warning(const char* code, const dsl::Span& span, std::string message,
                    std::string help) {
  out_->push_back(dsl::Diagnostic{dsl::Severity::kWarning, code, std::move(message), path_, span,
                                  std::move(help)});
}

std::string DescribeValue(const dsl::Value& v) {
  switch (v.kind) {
    case dsl::ValueKind::kIdent:
      return "identifier `" + v.text + "`";
    case dsl::ValueKind::kString:
      return "a string";
    case dsl::ValueKind::kInteger:
      return "the integer " + std::to_string(v.number);
    case dsl::ValueKind::kQuantity: {
      for (const auto& u : dsl::Units()) {
        if (u.name == v.unit) {
          return std::string(u.kind == dsl::UnitKind::kSize ? "the size " : "the duration ") +
                 std::to_string(v.number) + v.unit;
        }
      }
      return "the quantity " + std::to_string(v.number) + v.unit;
    }
    case dsl::ValueKind::kRegex:
      return "a regex";
    case dsl::ValueKind::kList:
      return "a list";
  }
  return "a value";
}

namespace {

std::optional<uint64_t> ReadQuantity(const dsl::Value& v, Diags& d, std::string_view what,
                                     dsl::UnitKind kind) {
  const char* kind_name = kind == dsl::UnitKind::kSize ? "size" : "duration";
  const char* example = kind == dsl::UnitKind::kSize ? "64MiB" : "30s";
  if (v.kind == dsl::ValueKind::kInteger) {
    d.Error("E022", v.span,
            std::string(what) + " needs a " + kind_name + " with a unit, found " + DescribeValue(v),
            "write it with a unit, e.g. `" + std::to_string(v.number) +
                (kind == dsl::UnitKind::kSize ? "MiB" : "s") + "`");
    return std::nullopt;
  }
  if (v.kind != dsl::ValueKind::kQuantity) {
    d.Error("E021", v.span,
            std::string(what) + " needs a " + kind_name + " such as " + example + ", found " +
                DescribeValue(v));
    return std::nullopt;
  }
  for (const auto& u : dsl::Units()) {
    if (u.name != v.unit) continue;
    if (u.kind != kind) {
      d.Error("E022", v.span,
              "`" + std::string(what) + "` needs a " + kind_name + ", but " +
                  std::to_string(v.number) + v.unit + " is a " +
                  (kind == dsl::UnitKind::kSize ? "duration" : "size"),
              std::string(kind == dsl::UnitKind::kSize ? "sizes use B, KiB, MiB, GiB, TiB"
                                                       : "durations use ns, us, ms, s, m, h"));
      return std::nullopt;
    }
    uint64_t out = 0;
    if (!dsl::ToBaseUnits(v, &out)) {  // overflow (the parser already refuses most, E009)
      d.Error("E023", v.span,
              std::string(what) + " = " + std::to_string(v.number) + v.unit +
                  " does not fit in 64 bits of base units");
      return std::nullopt;
    }
    return out;
  }
  d.Error("E022", v.span, "unknown unit `" + v.unit + "`");
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> ReadDuration(const dsl::Value& v, Diags& d, std::string_view what) {
  return ReadQuantity(v, d, what, dsl::UnitKind::kDuration);
}

std::optional<uint64_t> ReadSize(const dsl::Value& v, Diags& d, std::string_view what) {
  return ReadQuantity(v, d, what, dsl::UnitKind::kSize);
}

std::optional<uint64_t> ReadInteger(const dsl::Value& v, Diags& d, std::string_view what,
                                    uint64_t min, uint64_t max) {
  if (v.kind == dsl::ValueKind::kQuantity) {
    d.Error("E022", v.span, std::string(what) + " is a plain number, found " + DescribeValue(v),
            "drop the unit: `" + std::to_string(v.number) + "`");
    return std::nullopt;
  }
  if (v.kind != dsl::ValueKind::kInteger) {
    d.Error("E021", v.span, std::string(what) + " needs an integer, found " + DescribeValue(v));
    return std::nullopt;
  }
  if (v.number < min || v.number > max) {
    d.Error("E023", v.span,
            std::string(what) + " = " + std::to_string(v.number) + " is out of range (" +
                std::to_string(min) + " to " + std::to_string(max) + ")");
    return std::nullopt;
  }
  return v.number;
}

std::optional<bool> ReadBool(const dsl::Value& v, Diags& d, std::string_view what) {
  if (v.kind == dsl::ValueKind::kIdent && (v.text == "true" || v.text == "false")) {
    return v.text == "true";
  }
  d.Error("E021", v.span,
          std::string(what) + " needs `true` or `false`, found " + DescribeValue(v));
  return std::nullopt;
}

std::optional<std::string> ReadString(const dsl::Value& v, Diags& d, std::string_view what) {
  if (v.kind == dsl::ValueKind::kString) return v.text;
  d.Error("E021", v.span,
          std::string(what) + " needs a string in quotes, found " + DescribeValue(v),
          v.kind == dsl::ValueKind::kIdent ? "write `\"" + v.text + "\"`" : "");
  return std::nullopt;
}

std::optional<std::string> ReadChoice(const dsl::Value& v, Diags& d, std::string_view what,
                                      const std::vector<std::string_view>& choices) {
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i) list += i + 1 == choices.size() ? " or " : ", ";
    list += "`" + std::string(choices[i]) + "`";
  }
  if (v.kind != dsl::ValueKind::kIdent) {
    d.Error("E021", v.span,
            std::string(what) + " needs one of " + list + ", found " + DescribeValue(v));
    return std::nullopt;
  }
  for (auto c : choices) {
    if (v.text == c) return v.text;
  }
  std::string near = dsl::ClosestMatch(v.text, choices);
  d.Error("E026", v.span, "unknown " + std::string(what) + " `" + v.text + "`",
          near.empty() ? "expected " + list : "did you mean `" + near + "`?");
  return std::nullopt;
}

const std::vector<dsl::Value>* ReadList(const dsl::Value& v, Diags& d, std::string_view what) {
  if (v.kind == dsl::ValueKind::kList) return &v.items;
  d.Error("E021", v.span, std::string(what) + " needs a list `[...]`, found " + DescribeValue(v));
  return nullptr;
}

std::string FormatDuration(uint64_t ns) {
  struct U {
    uint64_t scale;
    const char* name;
  };
  static constexpr U kUnits[] = {{3600'000'000'000ULL, "h"},
                                 {60'000'000'000ULL, "m"},
                                 {1'000'000'000ULL, "s"},
                                 {1'000'000ULL, "ms"},
                                 {1'000ULL, "us"}};
  if (ns == 0) return "0s";
  for (const auto& u : kUnits) {
    if (ns % u.scale == 0) return std::to_string(ns / u.scale) + u.name;
  }
  return std::to_string(ns) + "ns";
}

std::string FormatSize(uint64_t bytes) {
  static constexpr const char* kNames[] = {"TiB", "GiB", "MiB", "KiB"};
  if (bytes == 0) return "0B";
  for (int i = 0; i < 4; ++i) {
    uint64_t scale = 1ULL << (10 * (4 - i));
    if (bytes % scale == 0) return std::to_string(bytes / scale) + kNames[i];
  }
  return std::to_string(bytes) + "B";
}

namespace {
struct ErrnoEntry {
  const char* name;
  int value;
};
constexpr ErrnoEntry kErrnos[] = {
    {"E2BIG", E2BIG},
    {"EACCES", EACCES},
    {"EAFNOSUPPORT", EAFNOSUPPORT},
    {"EAGAIN", EAGAIN},
    {"EBADF", EBADF},
    {"EBUSY", EBUSY},
    {"ECHILD", ECHILD},
    {"ECONNREFUSED", ECONNREFUSED},
    {"EEXIST", EEXIST},
    {"EFAULT", EFAULT},
    {"EHOSTUNREACH", EHOSTUNREACH},
    {"EINVAL", EINVAL},
    {"EIO", EIO},
    {"EISDIR", EISDIR},
    {"EMFILE", EMFILE},
    {"ENETUNREACH", ENETUNREACH},
    {"ENFILE", ENFILE},
    {"ENODEV", ENODEV},
    {"ENOENT", ENOENT},
    {"ENOEXEC", ENOEXEC},
    {"ENOMEM", ENOMEM},
    {"ENOSPC", ENOSPC},
    {"ENOSYS", ENOSYS},
    {"ENOTDIR", ENOTDIR},
    {"ENOTSUP", ENOTSUP},
    {"ENXIO", ENXIO},
    {"EOPNOTSUPP", EOPNOTSUPP},
    {"EPERM", EPERM},
    {"EPROTONOSUPPORT", EPROTONOSUPPORT},
    {"EROFS", EROFS},
    {"ESRCH", ESRCH},
    {"EXDEV", EXDEV},
};
}  // namespace

std::optional<int> ErrnoFromName(std::string_view name) {
  for (const auto& e : kErrnos) {
    if (name == e.name) return e.value;
  }
  return std::nullopt;
}

std::string ErrnoName(int value) {
  for (const auto& e : kErrnos) {
    if (value == e.value) return e.name;  // first name wins (ENOTSUP before EOPNOTSUPP)
  }
  return std::to_string(value);
}

std::vector<std::string_view> ErrnoNames() {
  std::vector<std::string_view> out;
  for (const auto& e : kErrnos) out.push_back(e.name);
  return out;
}

}  // namespace safex::compiler
