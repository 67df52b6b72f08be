#include "supervisor/serve/http_parser.h"

#include <algorithm>

namespace safex::serve {
namespace {

bool IsTchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-':
    case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

// Field values: visible ASCII, space, tab and obs-text (bytes >= 0x80); no other control bytes.
bool IsFieldValueByte(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

// origin-form: '/' then visible ASCII only.
bool IsTargetByte(unsigned char c) { return c > 0x20 && c < 0x7f; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace

const std::string* HttpRequest::Header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers) {
    if (k == lower_name) return &v;
  }
  return nullptr;
}

std::string_view HttpRequest::Path() const {
  std::string_view t = target;
  size_t q = t.find('?');
  return q == std::string_view::npos ? t : t.substr(0, q);
}

std::string_view HttpRequest::Query() const {
  std::string_view t = target;
  size_t q = t.find('?');
  return q == std::string_view::npos ? std::string_view() : t.substr(q + 1);
}

HttpRequestParser::State HttpRequestParser::Fail(int status, std::string message) {
  state_ = State::kError;
  error_status_ = status;
  error_message_ = std::move(message);
  return state_;
}

HttpRequestParser::State HttpRequestParser::Feed(std::string_view data, size_t* consumed) {
  size_t used = 0;
  if (consumed != nullptr) *consumed = 0;
  while (state_ == State::kNeedMore && used < data.size()) {
    if (phase_ == Phase::kHead) {
      // Take bytes up to and including the end of the head, never more than the cap allows.
      size_t room = limits_.max_header_bytes - head_.size();
      std::string_view chunk = data.substr(used, std::min(room, data.size() - used));
      size_t before = head_.size();
      head_.append(chunk);
      // The end of the head may straddle the previous chunk: search from a little before it.
      size_t from = before >= 3 ? before - 3 : 0;
      size_t end = head_.find("\r\n\r\n", from);
      if (end == std::string::npos) {
        used += chunk.size();
        if (head_.size() >= limits_.max_header_bytes) {
          return Fail(431, "request head larger than " + std::to_string(limits_.max_header_bytes) +
                               " bytes");
        }
        // A bare LF anywhere in the head is refused now rather than at its end.
        for (size_t i = before; i < head_.size(); ++i) {
          if (head_[i] == '\n' && (i == 0 || head_[i - 1] != '\r')) {
            return Fail(400, "bare LF in the request head (lines end with CRLF)");
          }
        }
        continue;
      }
      size_t head_len = end + 4;
      used += head_len - before;
      head_.resize(head_len);
      if (ParseHead() == State::kError) break;
      phase_ = Phase::kBody;
      if (content_length_ == 0) {
        state_ = State::kDone;
        break;
      }
      request_.body.reserve(static_cast<size_t>(content_length_));
      continue;
    }
    size_t want = static_cast<size_t>(content_length_ - request_.body.size());
    size_t take = std::min(want, data.size() - used);
    request_.body.append(data.substr(used, take));
    used += take;
    if (request_.body.size() == content_length_) state_ = State::kDone;
  }
  if (consumed != nullptr) *consumed = used;
  return state_;
}

HttpRequestParser::State HttpRequestParser::ParseHead() {
  std::string_view head(head_);
  head.remove_suffix(2);  // the final empty line's CRLF; every line below ends with CRLF
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < head.size()) {
    size_t eol = head.find("\r\n", pos);
    if (eol == std::string_view::npos) return Fail(400, "malformed request head");
    lines.push_back(head.substr(pos, eol - pos));
    pos = eol + 2;
  }
  if (lines.empty()) return Fail(400, "empty request");
  for (std::string_view l : lines) {
    if (l.find('\n') != std::string_view::npos || l.find('\r') != std::string_view::npos) {
      return Fail(400, "stray CR or LF in the request head");
    }
  }

  // Request line.
  std::string_view rl = lines[0];
  size_t sp1 = rl.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : rl.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      rl.find(' ', sp2 + 1) != std::string_view::npos) {
    return Fail(400, "malformed request line");
  }
  std::string_view method = rl.substr(0, sp1);
  std::string_view target = rl.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = rl.substr(sp2 + 1);
  if (method.empty() || method.size() > 16 || !std::all_of(method.begin(), method.end(), IsTchar)) {
    return Fail(400, "malformed method");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    if (version.starts_with("HTTP/")) return Fail(505, "only HTTP/1.1 and HTTP/1.0 are spoken");
    return Fail(400, "malformed HTTP version");
  }
  if (target.size() > limits_.max_target_bytes) return Fail(414, "request target too long");
  if (target.empty() || target[0] != '/' ||
      !std::all_of(target.begin(), target.end(),
                   [](char c) { return IsTargetByte(static_cast<unsigned char>(c)); })) {
    return Fail(400, "the request target must be a path (origin-form)");
  }
  request_.method = std::string(method);
  request_.target = std::string(target);
  request_.version = std::string(version);

  // Header fields.
  bool have_length = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    if (l.empty()) return Fail(400, "malformed header block");
    if (l[0] == ' ' || l[0] == '\t') return Fail(400, "obsolete header line folding");
    size_t colon = l.find(':');
    if (colon == std::string_view::npos || colon == 0) return Fail(400, "malformed header line");
    std::string_view name = l.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), IsTchar)) {
      return Fail(400, "malformed header name");
    }
    std::string_view value = l.substr(colon + 1);
    if (!std::all_of(value.begin(), value.end(),
                     [](char c) { return IsFieldValueByte(static_cast<unsigned char>(c)); })) {
      return Fail(400, "control character in a header value");
    }
    if (request_.headers.size() >= limits_.max_headers) {
      return Fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
    }
    std::string lname = Lower(name);
    value = Trim(value);
    if (lname == "content-length") {
      if (value.empty() || value.size() > 19 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return Fail(400, "malformed Content-Length");
      }
      uint64_t n = 0;
      for (char c : value) n = n * 10 + static_cast<uint64_t>(c - '0');
      if (have_length && n != content_length_) return Fail(400, "conflicting Content-Length");
      have_length = true;
      content_length_ = n;
    } else if (lname == "transfer-encoding") {
      return Fail(411, "Transfer-Encoding is not accepted; send a Content-Length");
    } else if (lname == "expect") {
      if (!EqualsIgnoreCase(value, "100-continue")) return Fail(417, "unsupported expectation");
      expect_continue_ = true;
    }
    request_.headers.emplace_back(std::move(lname), std::string(value));
  }
  if ((request_.method == "POST" || request_.method == "PUT") && !have_length) {
    return Fail(411, "a request with a body needs a Content-Length");
  }
  if (content_length_ > limits_.max_body_bytes) {
    return Fail(413, "request body of " + std::to_string(content_length_) +
                         " bytes is larger than the limit of " +
                         std::to_string(limits_.max_body_bytes));
  }
  if (content_length_ == 0) expect_continue_ = false;
  return state_;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

std::string FormatResponse(int status, std::string_view content_type, std::string_view body,
                           const std::vector<std::string>& extra_headers) {
  std::string out;
  out.reserve(body.size() + 160);
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += ReasonPhrase(status);
  out += "\r\nContent-Type: ";
  out += content_type;
  out += "\r\nContent-Length: ";
  out += std::to_string(body.size());
  out += "\r\nConnection: close\r\n";
  for (const std::string& h : extra_headers) {
    out += h;
    out += "\r\n";
  }
  out += "\r\n";
  out += body;
  return out;
}

}  // namespace safex::serve
