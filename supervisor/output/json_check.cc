#include "supervisor/output/json_check.h"

#include <cstring>
#include <deque>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

#include "supervisor/output/escape.h"
#include "supervisor/output/utf8.h"

namespace safex::output {
namespace {

enum class Type : uint8_t { kObject, kArray, kString, kNumber, kInteger, kBoolean, kNull };

const char* TypeName(Type t) {
  switch (t) {
    case Type::kObject:
      return "object";
    case Type::kArray:
      return "array";
    case Type::kString:
      return "string";
    case Type::kNumber:
      return "number";
    case Type::kInteger:
      return "integer";
    case Type::kBoolean:
      return "boolean";
    case Type::kNull:
      return "null";
  }
  return "?";
}

bool TypeSatisfies(Type actual, std::string_view required) {
  if (required == "number") return actual == Type::kNumber || actual == Type::kInteger;
  return required == TypeName(actual);
}

// One open container. Arrays track the index of the current element; objects the current
// member's name and every name seen so far (duplicate detection: a linear search while the object
// is small, a hash set beyond). Names are views of the input, or of a decoded copy when escaped.
struct Frame {
  static constexpr size_t kLinearKeys = 16;
  bool is_object = false;
  bool has_key = false;
  uint64_t index = 0;
  std::string_view key;
  std::vector<std::string_view> keys;
  std::unique_ptr<std::unordered_set<std::string_view>> key_set;

  // False when `k` was already a member.
  bool InsertKey(std::string_view k) {
    if (key_set) return key_set->insert(k).second;
    for (std::string_view seen : keys) {
      if (seen == k) return false;
    }
    keys.push_back(k);
    if (keys.size() > kLinearKeys) {
      key_set = std::make_unique<std::unordered_set<std::string_view>>(keys.begin(), keys.end());
      keys.clear();
      keys.shrink_to_fit();
    }
    return true;
  }
};

struct Member {
  Type type;
  uint64_t offset;
};

constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHighs = 0x8080808080808080ULL;

inline bool HasZeroByte(uint64_t v) { return ((v - kOnes) & ~v & kHighs) != 0; }

// True when the 8 bytes are printable ASCII other than '"' and '\\': nothing to look at in a
// string.
inline bool PlainStringBytes(uint64_t x) {
  if (x & kHighs) return false;
  if (((x - kOnes * 0x20) & ~x & kHighs) != 0) return false;  // a byte below 0x20
  return !HasZeroByte(x ^ (kOnes * '"')) && !HasZeroByte(x ^ (kOnes * '\\'));
}

bool IsIdentifier(std::string_view key) {
  if (key.empty() || key.size() > 64) return false;
  for (size_t i = 0; i < key.size(); ++i) {
    const char c = key[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

void AppendComponent(std::string* out, const Frame& f) {
  if (!f.is_object) {
    out->append("[" + std::to_string(f.index) + "]");
  } else if (f.has_key) {
    if (IsIdentifier(f.key)) {
      out->append(".");
      out->append(f.key);
    } else {
      out->append("[\"");
      EscapeOptions eo;
      eo.max_output = 64;
      eo.escape_double_quote = true;
      AppendEscaped(out, f.key, eo);
      out->append("\"]");
    }
  }
}

int HexValue(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Checker {
 public:
  Checker(std::string_view text, const JsonCheckOptions& options)
      : p_(reinterpret_cast<const unsigned char*>(text.data())),
        n_(text.size()),
        options_(options) {}

  JsonCheckResult Run();

 private:
  enum class State { kValue, kArrayFirst, kObjectFirst, kKey, kColon, kAfterValue, kDone };

  // Records the first problem; always returns false so callers can `return Fail(...)`.
  bool Fail(uint64_t offset, std::string message) {
    result_.ok = false;
    result_.offset = offset;
    result_.path = Path();
    result_.message = std::move(message);
    return false;
  }
  std::string Path() const;
  void SkipWhitespace() {
    while (pos_ < n_) {
      const unsigned char c = p_[pos_];
      if (c != ' ' && c != '\n' && c != '\t' && c != '\r') break;
      ++pos_;
    }
  }
  bool ParseValue(State* state);
  bool ParseString(std::string_view* key);
  bool ParseHex4(uint64_t at, uint32_t* value);
  bool ParseNumber(bool* is_integer);
  bool ParseLiteral(const char* literal);
  void ValueComplete(State* state) { *state = stack_.empty() ? State::kDone : State::kAfterValue; }
  void NoteTopLevelMember(Type type, uint64_t offset) {
    if (stack_.size() == 1 && stack_[0].is_object && stack_[0].has_key) {
      const std::string key(stack_[0].key);
      if (options_.required.count(key) != 0) members_[key] = Member{type, offset};
    }
  }
  bool CheckRequired();

  const unsigned char* p_;
  uint64_t n_;
  const JsonCheckOptions& options_;
  uint64_t pos_ = 0;
  std::vector<Frame> stack_;
  bool have_root_ = false;
  Type root_type_ = Type::kNull;
  std::map<std::string, Member> members_;
  std::deque<std::string> decoded_keys_;  // escaped keys, unescaped (stable addresses)
  JsonCheckResult result_;
};

std::string Checker::Path() const {
  std::string out = "$";
  constexpr size_t kShown = 10;  // a 100,000-deep path is elided in the middle
  if (stack_.size() <= 2 * kShown) {
    for (const Frame& f : stack_) AppendComponent(&out, f);
    return out;
  }
  for (size_t i = 0; i < kShown; ++i) AppendComponent(&out, stack_[i]);
  out.append("...(" + std::to_string(stack_.size() - 2 * kShown) + " levels)...");
  for (size_t i = stack_.size() - kShown; i < stack_.size(); ++i) AppendComponent(&out, stack_[i]);
  return out;
}

bool Checker::ParseHex4(uint64_t at, uint32_t* value) {
  uint32_t v = 0;
  for (uint64_t k = 0; k < 4; ++k) {
    if (at + k >= n_) return Fail(at + k, "truncated \\u escape");
    const int h = HexValue(p_[at + k]);
    if (h < 0) return Fail(at + k, "\\u escape needs four hex digits");
    v = (v << 4) | static_cast<uint32_t>(h);
  }
  *value = v;
  return true;
}

// At '"'. Leaves pos_ after the closing quote. `key` (may be null) receives the unescaped text:
// a view of the input when there is no escape, else of a decoded copy.
bool Checker::ParseString(std::string_view* key) {
  const uint64_t start = pos_;
  std::string* decoded = nullptr;
  ++pos_;
  uint64_t run = pos_;  // start of bytes not yet copied to *decoded
  for (;;) {
    while (n_ - pos_ >= 8) {
      uint64_t x;
      std::memcpy(&x, p_ + pos_, 8);
      if (!PlainStringBytes(x)) break;
      pos_ += 8;
    }
    if (pos_ >= n_) return Fail(start, "unterminated string");
    const unsigned char c = p_[pos_];
    if (c == '"') {
      if (decoded) {
        decoded->append(reinterpret_cast<const char*>(p_ + run), pos_ - run);
        *key = *decoded;
      } else if (key) {
        *key = std::string_view(reinterpret_cast<const char*>(p_ + start + 1), pos_ - start - 1);
      }
      ++pos_;
      return true;
    }
    if (c < 0x20) return Fail(pos_, "unescaped control character in string");
    if (c >= 0x80) {
      const Utf8Char u = DecodeUtf8(p_ + pos_, p_ + n_);
      if (u.status != Utf8Status::kOk) return Fail(pos_, "invalid UTF-8 in string");
      pos_ += u.length;
      continue;
    }
    if (c != '\\') {
      ++pos_;
      continue;
    }
    // An escape.
    if (key != nullptr && decoded == nullptr) decoded = &decoded_keys_.emplace_back();
    if (decoded) decoded->append(reinterpret_cast<const char*>(p_ + run), pos_ - run);
    const uint64_t esc = pos_;
    if (pos_ + 1 >= n_) return Fail(esc, "unterminated string");
    const unsigned char e = p_[pos_ + 1];
    pos_ += 2;
    char simple = 0;
    switch (e) {
      case '"':
        simple = '"';
        break;
      case '\\':
        simple = '\\';
        break;
      case '/':
        simple = '/';
        break;
      case 'b':
        simple = '\b';
        break;
      case 'f':
        simple = '\f';
        break;
      case 'n':
        simple = '\n';
        break;
      case 'r':
        simple = '\r';
        break;
      case 't':
        simple = '\t';
        break;
      case 'u': {
        uint32_t cp = 0;
        if (!ParseHex4(pos_, &cp)) return false;
        pos_ += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return Fail(esc, "lone low surrogate in \\u escape");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (n_ - pos_ < 2 || p_[pos_] != '\\' || p_[pos_ + 1] != 'u') {
            return Fail(esc, "lone high surrogate in \\u escape");
          }
          uint32_t low = 0;
          if (!ParseHex4(pos_ + 2, &low)) return false;
          if (low < 0xDC00 || low > 0xDFFF) {
            return Fail(esc, "high surrogate not followed by a low surrogate");
          }
          pos_ += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        if (decoded) AppendUtf8(decoded, cp);
        break;
      }
      default:
        return Fail(esc, "invalid escape in string");
    }
    if (simple != 0 && decoded) decoded->push_back(simple);
    run = pos_;
  }
}

bool Checker::ParseNumber(bool* is_integer) {
  const uint64_t start = pos_;
  auto digit = [&](uint64_t i) { return i < n_ && p_[i] >= '0' && p_[i] <= '9'; };
  if (p_[pos_] == '-') ++pos_;
  if (pos_ >= n_) return Fail(pos_, "unexpected end of input in number");
  if (p_[pos_] == '0') {
    ++pos_;
    if (digit(pos_)) return Fail(pos_ - 1, "leading zeros are not allowed in numbers");
  } else if (digit(pos_)) {
    while (digit(pos_)) ++pos_;
  } else {
    return Fail(pos_, "expected a digit");
  }
  *is_integer = true;
  if (pos_ < n_ && p_[pos_] == '.') {
    ++pos_;
    if (!digit(pos_)) return Fail(pos_, "expected a digit after '.'");
    while (digit(pos_)) ++pos_;
    *is_integer = false;
  }
  if (pos_ < n_ && (p_[pos_] == 'e' || p_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < n_ && (p_[pos_] == '+' || p_[pos_] == '-')) ++pos_;
    if (!digit(pos_)) return Fail(pos_, "expected a digit in the exponent");
    while (digit(pos_)) ++pos_;
    *is_integer = false;
  }
  if (options_.max_number_chars != 0 && pos_ - start > options_.max_number_chars) {
    return Fail(start, "number has " + std::to_string(pos_ - start) + " characters, more than " +
                           std::to_string(options_.max_number_chars));
  }
  return true;
}

bool Checker::ParseLiteral(const char* literal) {
  const size_t len = std::strlen(literal);
  if (n_ - pos_ < len || std::memcmp(p_ + pos_, literal, len) != 0) {
    return Fail(pos_, "invalid literal (expected a value)");
  }
  pos_ += len;
  return true;
}

bool Checker::ParseValue(State* state) {
  const uint64_t start = pos_;
  const unsigned char c = p_[pos_];
  Type type;
  switch (c) {
    case '{':
    case '[': {
      type = c == '{' ? Type::kObject : Type::kArray;
      if (stack_.size() >= options_.max_depth) {
        return Fail(start,
                    "nesting deeper than json_max_depth = " + std::to_string(options_.max_depth));
      }
      break;
    }
    case '"':
      type = Type::kString;
      break;
    case 't':
    case 'f':
      type = Type::kBoolean;
      break;
    case 'n':
      type = Type::kNull;
      break;
    default:
      if (c == '-' || (c >= '0' && c <= '9')) {
        type = Type::kNumber;
      } else {
        return Fail(start, "expected a value");
      }
  }
  if (!have_root_) {
    have_root_ = true;
    root_type_ = type;
  }
  switch (type) {
    case Type::kObject:
    case Type::kArray:
      NoteTopLevelMember(type, start);
      stack_.emplace_back();
      stack_.back().is_object = type == Type::kObject;
      ++pos_;
      *state = type == Type::kObject ? State::kObjectFirst : State::kArrayFirst;
      return true;
    case Type::kString:
      if (!ParseString(nullptr)) return false;
      break;
    case Type::kBoolean:
      if (!ParseLiteral(c == 't' ? "true" : "false")) return false;
      break;
    case Type::kNull:
      if (!ParseLiteral("null")) return false;
      break;
    default: {
      bool is_integer = false;
      if (!ParseNumber(&is_integer)) return false;
      if (is_integer) type = Type::kInteger;
      if (stack_.empty()) root_type_ = type;  // a number at the top level
      break;
    }
  }
  NoteTopLevelMember(type, start);
  ValueComplete(state);
  return true;
}

bool Checker::CheckRequired() {
  if (options_.required.empty()) return true;
  if (root_type_ != Type::kObject) {
    return Fail(0, std::string("required keys need an object at the top level, found ") +
                       TypeName(root_type_));
  }
  // Report paths as "$.key": build them by hand, the stack is empty now.
  Frame f;
  f.is_object = true;
  f.has_key = true;
  for (const auto& [key, type] : options_.required) {
    f.key = key;
    auto it = members_.find(key);
    if (it == members_.end()) {
      Fail(0, "required key is missing");
      result_.path = "$";
      AppendComponent(&result_.path, f);
      return false;
    }
    if (!TypeSatisfies(it->second.type, type)) {
      Fail(it->second.offset, std::string("has type ") + TypeName(it->second.type) + ", required " +
                                  EscapeForLog(type, {.max_output = 32}));
      result_.path = "$";
      AppendComponent(&result_.path, f);
      return false;
    }
  }
  return true;
}

JsonCheckResult Checker::Run() {
  if (options_.max_bytes != 0 && n_ > options_.max_bytes) {
    Fail(options_.max_bytes, "document is " + std::to_string(n_) + " bytes, more than " +
                                 std::to_string(options_.max_bytes));
    return result_;
  }
  if (n_ >= 3 && p_[0] == 0xEF && p_[1] == 0xBB && p_[2] == 0xBF) {
    Fail(0, "byte order mark is not allowed");
    return result_;
  }
  State state = State::kValue;
  for (;;) {
    SkipWhitespace();
    if (pos_ >= n_) break;
    const unsigned char c = p_[pos_];
    switch (state) {
      case State::kArrayFirst:
        if (c == ']') {
          ++pos_;
          stack_.pop_back();
          ValueComplete(&state);
          continue;
        }
        [[fallthrough]];
      case State::kValue:
        if (!ParseValue(&state)) return result_;
        continue;
      case State::kObjectFirst:
        if (c == '}') {
          ++pos_;
          stack_.pop_back();
          ValueComplete(&state);
          continue;
        }
        [[fallthrough]];
      case State::kKey: {
        if (c != '"') {
          Fail(pos_, "expected a string key");
          return result_;
        }
        const uint64_t key_at = pos_;
        std::string_view key;
        if (!ParseString(&key)) return result_;
        Frame& f = stack_.back();
        f.key = key;
        f.has_key = true;
        if (!f.InsertKey(key)) {
          Fail(key_at, "duplicate key");
          return result_;
        }
        state = State::kColon;
        continue;
      }
      case State::kColon:
        if (c != ':') {
          Fail(pos_, "expected ':' after the key");
          return result_;
        }
        ++pos_;
        state = State::kValue;
        continue;
      case State::kAfterValue: {
        Frame& f = stack_.back();
        if (c == ',') {
          ++pos_;
          if (f.is_object) {
            f.has_key = false;
            state = State::kKey;
          } else {
            ++f.index;
            state = State::kValue;
          }
          continue;
        }
        if (c == (f.is_object ? '}' : ']')) {
          ++pos_;
          stack_.pop_back();
          ValueComplete(&state);
          continue;
        }
        Fail(pos_, f.is_object ? "expected ',' or '}'" : "expected ',' or ']'");
        return result_;
      }
      case State::kDone:
        Fail(pos_, "unexpected characters after the JSON value");
        return result_;
    }
  }
  if (state != State::kDone) {
    Fail(n_, have_root_ ? "unexpected end of input" : "empty document");
    return result_;
  }
  CheckRequired();
  return result_;
}

}  // namespace

JsonCheckResult CheckJson(std::string_view text, const JsonCheckOptions& options) {
  return Checker(text, options).Run();
}

bool IsKnownJsonType(std::string_view type) {
  return type == "string" || type == "number" || type == "integer" || type == "boolean" ||
         type == "object" || type == "array" || type == "null";
}

}  // namespace safex::output
