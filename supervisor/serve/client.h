// The client side of the daemon's API (`safex submit`): one HTTP/1.1 request over the Unix
// socket, one response read to its end.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <string>
#include <vector>

#include "common/status.h"

namespace safex::serve {

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;
  // The run the service admitted the request as, from its Safex-Run-Id header (of the final or of
  // an interim response); "" when it named none.
  std::string run_id;
  // False when the whole request was sent but the connection ended before a complete final
  // response: the request may or may not have run (run_id says which run, when known).
  bool complete = true;
};

struct HttpCallOptions {
  uint64_t max_response_bytes = 1ull << 30;
  std::vector<std::string> headers;  // extra request headers ("Name: value")
};

// Connects to `socket_path`, sends the request and reads the whole response (the daemon closes
// the connection after it). An error means the request cannot have been taken: no daemon listens
// there (Unavailable), or the request could not be sent whole. A connection that ends after the
// whole request was sent and before a complete response is a response with complete == false.
// Responses larger than max_response_bytes are an error.
Result<HttpResponse> HttpCall(const std::string& socket_path, const std::string& method,
                              const std::string& target, const std::string& body,
                              const HttpCallOptions& options = {});

// The same request, for an answer that is an event stream (`Accept: application/x-ndjson` on
// POST /v1/runs, or GET /v1/runs/ID/events): each complete line of a chunked response body is
// given to `on_line` as it arrives (without its newline). The returned response has the status,
// the run id and, for a response that is not chunked (an error, a refusal), its whole body;
// `complete` is false when the connection ended before the stream's last chunk.
Result<HttpResponse> HttpStream(const std::string& socket_path, const std::string& method,
                                const std::string& target, const std::string& body,
                                const std::function<void(std::string_view line)>& on_line,
                                const HttpCallOptions& options = {});

// Parses a whole response (exposed for tests).
Result<HttpResponse> ParseHttpResponse(const std::string& raw);

}  // namespace safex::serve
