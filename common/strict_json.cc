#include "common/strict_json.h"

#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace safex {
namespace {

using Json = nlohmann::json;

// Builds the tree as nlohmann's own DOM parser would, and stops at the first key an object
// already has, the first float when only integers are allowed, and the first level too deep.
class StrictSax {
 public:
  explicit StrictSax(const StrictJsonOptions& options) : options_(options) {}

  bool null() { return Put(Json(nullptr)); }
  bool boolean(bool b) { return Put(Json(b)); }
  bool number_integer(Json::number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(Json::number_float_t v, const std::string& text) {
    if (options_.integers_only) return Fail("number " + text + " is not an integer in range");
    return Put(Json(v));
  }
  bool string(std::string& s) { return Put(Json(std::move(s))); }
  bool binary(Json::binary_t&) { return Fail("binary values are not JSON"); }
  bool start_object(std::size_t) { return Open(Json::object()); }
  bool key(std::string& k) {
    // Keys are compared after unescaping: "a" and "\u0061" are the same name.
    if (stack_.back()->contains(k)) return Fail("duplicate key \"" + k + "\"");
    key_ = std::move(k);
    return true;
  }
  bool end_object() {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& ex) {
    if (error_.empty()) {
      std::string what = ex.what();
      // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> keep the tail.
      auto bracket = what.find("] ");
      error_ = "byte " + std::to_string(pos) + ": " +
               (bracket == std::string::npos ? what : what.substr(bracket + 2));
    }
    return false;
  }

  Json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string m) {
    if (error_.empty()) error_ = std::move(m);
    return false;
  }
  // Inserts v where the parser is (array element, object member or root); returns its address,
  // which stays valid while v's container is open (nothing else is inserted into it meanwhile).
  Json* Insert(Json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    Json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }
  bool Put(Json v) {
    Insert(std::move(v));
    return true;
  }
  bool Open(Json v) {
    if (stack_.size() >= options_.max_depth) {
      return Fail("nesting deeper than " + std::to_string(options_.max_depth));
    }
    stack_.push_back(Insert(std::move(v)));
    return true;
  }

  const StrictJsonOptions& options_;
  Json root_;
  std::vector<Json*> stack_;
  std::string key_;
  std::string error_;
};

}  // namespace

Result<nlohmann::json> ParseStrictJson(std::string_view text, const StrictJsonOptions& options) {
  if (text.starts_with("\xEF\xBB\xBF")) {
    return Status::InvalidArgument("byte 0: a byte order mark (U+FEFF) before the document");
  }
  try {
    StrictSax sax(options);
    const bool parsed = Json::sax_parse(text.begin(), text.end(), &sax,
                                        nlohmann::detail::input_format_t::json, /*strict=*/true);
    if (!parsed || !sax.error().empty()) {
      return Status::InvalidArgument(sax.error().empty() ? "malformed JSON" : sax.error());
    }
    return std::move(sax.root());
  } catch (const std::exception& e) {
    // The SAX interface reports errors by return value; this is the library boundary rule.
    return Status::InvalidArgument(std::string("malformed JSON: ") + e.what());
  }
}

}  // namespace safex
