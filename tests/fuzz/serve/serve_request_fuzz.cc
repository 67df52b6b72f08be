// libFuzzer target over the daemon's request parsing (supervisor/serve/http_parser.h,
// submit_request.h). See CMakeLists.txt for the properties checked.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "supervisor/serve/http_parser.h"
#include "supervisor/serve/submit_request.h"

namespace {

using safex::serve::HttpLimits;
using safex::serve::HttpRequestParser;

void Check(bool cond) {
  if (!cond) std::abort();
}

HttpRequestParser::State FeedInPieces(std::string_view data, const HttpLimits& limits,
                                      uint8_t seed, HttpRequestParser* p) {
  size_t pos = 0;
  uint32_t x = seed | 1u;
  while (pos < data.size() && p->state() == HttpRequestParser::State::kNeedMore) {
    x = x * 1103515245u + 12345u;
    size_t n = 1 + (x >> 16) % 97;
    size_t used = 0;
    p->Feed(data.substr(pos, n), &used);
    Check(used <= n);
    pos += used;
    if (used < std::min(n, data.size() - pos + used)) break;  // stopped: done or error
  }
  (void)limits;
  return p->state();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view all(reinterpret_cast<const char*>(data), size);
  uint8_t seed = data[0];
  std::string_view input = all.substr(1);

  HttpLimits limits;
  limits.max_header_bytes = 1024;
  limits.max_headers = 16;
  limits.max_target_bytes = 256;
  limits.max_body_bytes = 4096;

  HttpRequestParser whole(limits);
  size_t used = 0;
  auto st1 = whole.Feed(input, &used);
  Check(used <= input.size());
  Check(whole.request().body.size() <= limits.max_body_bytes);
  Check(whole.request().headers.size() <= limits.max_headers);
  if (st1 == HttpRequestParser::State::kError) {
    Check(whole.error_status() >= 400 && whole.error_status() < 600);
  }

  HttpRequestParser pieces(limits);
  auto st2 = FeedInPieces(input, limits, seed, &pieces);
  // Splitting must not change a completed parse (errors may be found at different points only
  // when the input was already invalid).
  if (st1 == HttpRequestParser::State::kDone) {
    Check(st2 == HttpRequestParser::State::kDone);
    Check(pieces.request().method == whole.request().method);
    Check(pieces.request().target == whole.request().target);
    Check(pieces.request().body == whole.request().body);
    Check(pieces.request().headers == whole.request().headers);
  }
  if (st1 == HttpRequestParser::State::kDone) {
    Check(!whole.request().target.empty() && whole.request().target[0] == '/');
  }

  // The JSON decoder on the body (or on the raw input when there is none).
  std::string_view body = st1 == HttpRequestParser::State::kDone ? std::string_view(whole.request().body)
                                                               : input;
  safex::serve::RequestLimits rl;
  rl.max_argv = 8;
  rl.max_argv_bytes = 512;
  rl.max_stdin_bytes = 256;
  rl.max_input_files = 4;
  rl.max_input_bytes = 512;
  auto req = safex::serve::ParseSubmitRequest(body, rl);
  if (req.ok()) {
    Check(safex::serve::ValidPolicyName(req->policy));
    Check(!req->argv.empty() && req->argv.size() <= rl.max_argv && !req->argv[0].empty());
    size_t argv_bytes = 0;
    for (const auto& a : req->argv) {
      Check(a.find('\0') == std::string::npos);
      argv_bytes += a.size() + 1;
    }
    Check(argv_bytes <= rl.max_argv_bytes);
    Check(!req->stdin_data || req->stdin_data->size() <= rl.max_stdin_bytes);
    Check(req->files.size() <= rl.max_input_files);
    size_t total = 0;
    for (const auto& f : req->files) {
      Check(safex::serve::ValidInputFileName(f.name));
      total += f.data.size();
    }
    Check(total <= rl.max_input_bytes);
    auto again = safex::serve::EncodeSubmitRequest(*req);
    Check(again.ok());
    auto back = safex::serve::ParseSubmitRequest(*again, rl);
    Check(back.ok());
    Check(back->policy == req->policy && back->argv == req->argv &&
          back->stdin_data == req->stdin_data && back->files.size() == req->files.size());
  }
  return 0;
}
