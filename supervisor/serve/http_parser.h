// A small, strict, incremental HTTP/1.1 request parser for the daemon's Unix socket.
//
// Why not cpp-httplib: the daemon must know the peer's SO_PEERCRED for every connection, bound
// every byte it buffers, and time out slow clients without a thread each; httplib hides the
// accepted socket and reads with blocking threads. The subset spoken here is what curl and
// `safex submit` send:
//   - one request per connection (the response always says Connection: close);
//   - request line `METHOD SP origin-form SP HTTP/1.x CRLF`, header lines `name: value CRLF`,
//     an empty line; bare LF, obsolete line folding and control bytes are errors;
//   - a body only with Content-Length (decimal, at most max_body_bytes); Transfer-Encoding is
//     refused (411), a POST without Content-Length is refused (411);
//   - `Expect: 100-continue` is noticed (expects_continue()) so the server can say 100 Continue.
// Everything the parser keeps is bounded by max_header_bytes + max_body_bytes.
//
// Pure code (no I/O): fuzzed by tests/fuzz/serve and property-tested in tests/serve.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace safex::serve {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;  // request line + headers + the empty line
  size_t max_headers = 64;
  size_t max_target_bytes = 2048;
  uint64_t max_body_bytes = 8ull << 20;
};

struct HttpRequest {
  std::string method;   // e.g. "GET", "POST"
  std::string target;   // origin-form, e.g. "/v1/runs?limit=5" (starts with '/')
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string body;

  // The first header of that (lower-case) name, or nullptr.
  const std::string* Header(std::string_view lower_name) const;
  // The target without its query string, and the query string (without '?').
  std::string_view Path() const;
  std::string_view Query() const;
};

class HttpRequestParser {
 public:
  enum class State {
    kNeedMore,  // give it more bytes
    kDone,      // request() is complete; bytes after it are not consumed
    kError,     // error_status() / error_message(); the connection must be answered and closed
  };

  explicit HttpRequestParser(HttpLimits limits = {}) : limits_(limits) {}

  // Consumes bytes of one request. `consumed` (optional) gets how many bytes of `data` were
  // taken. After kDone or kError, further calls change nothing.
  State Feed(std::string_view data, size_t* consumed = nullptr);

  State state() const { return state_; }
  // True once the headers are complete and the body is still to come.
  bool headers_done() const { return phase_ == Phase::kBody || state_ == State::kDone; }
  bool expects_continue() const { return expect_continue_; }
  uint64_t content_length() const { return content_length_; }

  const HttpRequest& request() const { return request_; }
  HttpRequest& request() { return request_; }
  int error_status() const { return error_status_; }  // 400, 405, 411, 413, 414, 431, 501, 505
  const std::string& error_message() const { return error_message_; }

 private:
  enum class Phase { kHead, kBody };
  State Fail(int status, std::string message);
  State ParseHead();

  HttpLimits limits_;
  State state_ = State::kNeedMore;
  Phase phase_ = Phase::kHead;
  std::string head_;  // bytes of the head so far (bounded by max_header_bytes)
  HttpRequest request_;
  uint64_t content_length_ = 0;
  bool expect_continue_ = false;
  int error_status_ = 0;
  std::string error_message_;
};

// The reason phrase of a status code the daemon uses ("OK", "Not Found", ...).
const char* ReasonPhrase(int status);

// A whole response: status line, Content-Type, Content-Length, Connection: close, the extra
// headers ("Name: value" each, no CRLF) and the body.
std::string FormatResponse(int status, std::string_view content_type, std::string_view body,
                           const std::vector<std::string>& extra_headers = {});

}  // namespace safex::serve
