// The client side of the daemon's API (`safex submit`): one HTTP/1.1 request over the Unix
// socket, one response read to its end.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace safex::serve {

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};

// Connects to `socket_path`, sends the request and reads the whole response (the daemon closes
// the connection after it). Unavailable when no daemon listens there; responses larger than
// `max_response_bytes` are an error.
Result<HttpResponse> HttpCall(const std::string& socket_path, const std::string& method,
                              const std::string& target, const std::string& body,
                              uint64_t max_response_bytes = 1ull << 30);

// Parses a whole response (exposed for tests).
Result<HttpResponse> ParseHttpResponse(const std::string& raw);

}  // namespace safex::serve
