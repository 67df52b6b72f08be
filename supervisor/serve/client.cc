#include "supervisor/serve/client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <tuple>
#include <utility>

#include "common/unique_fd.h"
#include "supervisor/serve/unix_socket.h"

namespace safex::serve {

namespace {

// The value of the first header `lower_name` in a response head ("" when absent).
std::string HeaderValue(std::string_view head, std::string_view lower_name) {
  size_t line = head.find("\r\n");
  while (line != std::string_view::npos) {
    size_t next = head.find("\r\n", line + 2);
    std::string_view h = head.substr(
        line + 2, next == std::string_view::npos ? std::string_view::npos : next - line - 2);
    size_t colon = h.find(':');
    if (colon != std::string_view::npos && colon == lower_name.size()) {
      bool same = true;
      for (size_t i = 0; i < colon; ++i) {
        same = same && std::tolower(static_cast<unsigned char>(h[i])) == lower_name[i];
      }
      if (same) {
        std::string_view v = h.substr(colon + 1);
        while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
        return std::string(v);
      }
    }
    line = next;
  }
  return "";
}

// Where the head of the first final (non-1xx) response in `raw` starts and ends (the offset of
// its blank line); npos for the end while it is incomplete.
std::pair<size_t, size_t> FinalHead(const std::string& raw) {
  size_t pos = 0;
  for (;;) {
    size_t end = raw.find("\r\n\r\n", pos);
    if (end == std::string::npos) return {pos, std::string::npos};
    const bool interim = raw.compare(pos, 9, "HTTP/1.1 ") == 0 && raw.size() > pos + 9 &&
                         raw[pos + 9] == '1';
    if (!interim) return {pos, end};
    pos = end + 4;
  }
}

}  // namespace

Result<HttpResponse> ParseHttpResponse(const std::string& raw) {
  size_t pos = 0;
  std::string interim_run_id;
  for (;;) {
    size_t end = raw.find("\r\n\r\n", pos);
    if (end == std::string::npos) {
      // Cut before a final response; what an interim one said is still worth knowing.
      HttpResponse cut;
      cut.complete = false;
      cut.run_id = interim_run_id;
      return cut;
    }
    std::string_view head(raw.data() + pos, end - pos);
    if (!head.starts_with("HTTP/1.")) return Status::Unavailable("not an HTTP response");
    size_t sp = head.find(' ');
    if (sp == std::string_view::npos || head.size() < sp + 4) {
      return Status::Unavailable("malformed status line");
    }
    int status = 0;
    for (size_t i = sp + 1; i < sp + 4; ++i) {
      char c = head[i];
      if (c < '0' || c > '9') return Status::Unavailable("malformed status code");
      status = status * 10 + (c - '0');
    }
    size_t body_start = end + 4;
    if (status >= 100 && status < 200) {  // interim (100 Continue, 102): the real one follows
      if (std::string id = HeaderValue(head, "safex-run-id"); !id.empty()) interim_run_id = id;
      pos = body_start;
      continue;
    }
    HttpResponse r;
    r.status = status;
    r.run_id = HeaderValue(head, "safex-run-id");
    if (r.run_id.empty()) r.run_id = interim_run_id;
    int64_t length = -1;
    size_t line = head.find("\r\n");
    while (line != std::string_view::npos) {
      size_t next = head.find("\r\n", line + 2);
      std::string_view h = head.substr(
          line + 2, next == std::string_view::npos ? std::string_view::npos : next - line - 2);
      size_t colon = h.find(':');
      if (colon != std::string_view::npos) {
        std::string name(h.substr(0, colon));
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string_view v = h.substr(colon + 1);
        while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
        if (name == "content-length") {
          length = 0;
          for (char c : v) {
            if (c < '0' || c > '9' || length > (int64_t{1} << 40)) {
              return Status::Unavailable("malformed Content-Length");
            }
            length = length * 10 + (c - '0');
          }
        } else if (name == "content-type") {
          r.content_type = std::string(v);
        }
      }
      line = next;
    }
    if (length < 0) {
      r.body = raw.substr(body_start);
    } else {
      if (raw.size() - body_start < static_cast<size_t>(length)) {
        r.complete = false;  // the service closed the connection mid-response
        r.body.clear();
        return r;
      }
      r.body = raw.substr(body_start, static_cast<size_t>(length));
    }
    return r;
  }
}

namespace {

// Connects and sends the whole request (then half-closes: the service answers a client that has
// finished sending). `sent_whole`: false when the service closed the connection before.
Result<UniqueFd> SendRequest(const std::string& socket_path, const std::string& method,
                             const std::string& target, const std::string& body,
                             const HttpCallOptions& options, bool* sent_whole) {
  SAFEX_ASSIGN_OR_RETURN(UniqueFd fd, ConnectUnix(socket_path));
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: safex\r\n";
  if (!body.empty() || method == "POST") {
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  for (const std::string& h : options.headers) req += h + "\r\n";
  req += "Connection: close\r\n\r\n";
  req += body;
  size_t off = 0;
  while (off < req.size()) {
    ssize_t n = send(fd.get(), req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      // The daemon may answer (e.g. 413) and close before reading everything: read its answer.
      if (errno == EPIPE || errno == ECONNRESET) break;
      return Status::Errno("send", socket_path, errno);
    }
    off += static_cast<size_t>(n);
  }
  *sent_whole = off == req.size();
  shutdown(fd.get(), SHUT_WR);
  return fd;
}

// Reads what the service sends next into `raw`: false at the end of the connection.
Result<bool> ReadMore(int fd, const std::string& socket_path, const HttpCallOptions& options,
                      std::string& raw) {
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ECONNRESET) return false;  // what arrived is parsed; a cut is said by `complete`
      return Status::Errno("recv", socket_path, errno);
    }
    if (n == 0) return false;
    raw.append(buf, static_cast<size_t>(n));
    if (raw.size() > options.max_response_bytes) {
      return Status::ResourceExhausted("the service's response is larger than " +
                                       std::to_string(options.max_response_bytes) + " bytes");
    }
    return true;
  }
}

// Decodes the chunks complete in raw[*pos..] into `lines` (calling on_line per complete line).
// True once the last chunk (size 0) was seen; an error for a malformed chunk.
Result<bool> DecodeChunks(const std::string& raw, size_t* pos, std::string& lines,
                          const std::function<void(std::string_view)>& on_line) {
  for (;;) {
    size_t eol = raw.find("\r\n", *pos);
    if (eol == std::string::npos) return false;
    size_t size = 0;
    if (eol == *pos || eol - *pos > 12) return Status::Unavailable("malformed chunk size");
    for (size_t i = *pos; i < eol; ++i) {
      const int d = std::isxdigit(static_cast<unsigned char>(raw[i]))
                        ? (std::isdigit(static_cast<unsigned char>(raw[i]))
                               ? raw[i] - '0'
                               : std::tolower(static_cast<unsigned char>(raw[i])) - 'a' + 10)
                        : -1;
      if (d < 0) return Status::Unavailable("malformed chunk size");
      size = size * 16 + static_cast<size_t>(d);
    }
    if (size == 0) return true;
    if (raw.size() < eol + 2 + size + 2) return false;
    lines.append(raw, eol + 2, size);
    *pos = eol + 2 + size + 2;
    for (size_t nl; (nl = lines.find('\n')) != std::string::npos; lines.erase(0, nl + 1)) {
      on_line(std::string_view(lines).substr(0, nl));
    }
  }
}

}  // namespace

Result<HttpResponse> HttpCall(const std::string& socket_path, const std::string& method,
                              const std::string& target, const std::string& body,
                              const HttpCallOptions& options) {
  bool sent_whole = false;
  SAFEX_ASSIGN_OR_RETURN(UniqueFd fd,
                         SendRequest(socket_path, method, target, body, options, &sent_whole));
  std::string raw;
  for (;;) {
    SAFEX_ASSIGN_OR_RETURN(bool more, ReadMore(fd.get(), socket_path, options, raw));
    if (!more) break;
  }
  if (raw.empty()) {
    // No answer at all. Unless the whole request went out, the service cannot have taken it.
    if (!sent_whole) return Status::Unavailable("the service closed the connection");
    HttpResponse none;
    none.complete = false;
    return none;
  }
  return ParseHttpResponse(raw);
}

Result<HttpResponse> HttpStream(const std::string& socket_path, const std::string& method,
                                const std::string& target, const std::string& body,
                                const std::function<void(std::string_view line)>& on_line,
                                const HttpCallOptions& options) {
  bool sent_whole = false;
  SAFEX_ASSIGN_OR_RETURN(UniqueFd fd,
                         SendRequest(socket_path, method, target, body, options, &sent_whole));
  // 1. Until the final response's head (interim 1xx responses are skipped by the parser).
  std::string raw;
  size_t head_start = 0, head_end = std::string::npos;
  bool more = true;
  while (more) {
    SAFEX_ASSIGN_OR_RETURN(more, ReadMore(fd.get(), socket_path, options, raw));
    std::tie(head_start, head_end) = FinalHead(raw);
    if (head_end != std::string::npos) break;
  }
  if (head_end == std::string::npos) {
    if (raw.empty() && !sent_whole) return Status::Unavailable("the service closed the connection");
    return ParseHttpResponse(raw);  // cut before a final response: complete == false
  }
  const std::string head = raw.substr(0, head_end);
  if (HeaderValue(std::string_view(head).substr(head_start), "transfer-encoding") != "chunked") {
    // 2a. A whole answer (an error, a refusal): read to the end.
    while (more) {
      SAFEX_ASSIGN_OR_RETURN(more, ReadMore(fd.get(), socket_path, options, raw));
    }
    return ParseHttpResponse(raw);
  }
  // 2b. The stream: lines as their chunks arrive, until the last chunk or the connection's end.
  SAFEX_ASSIGN_OR_RETURN(HttpResponse r, ParseHttpResponse(head + "\r\n\r\n"));
  r.body.clear();
  r.complete = false;
  size_t pos = head_end + 4;
  std::string lines;
  for (;;) {
    SAFEX_ASSIGN_OR_RETURN(bool last, DecodeChunks(raw, &pos, lines, on_line));
    if (last) {
      r.complete = true;
      return r;
    }
    if (!more) return r;
    SAFEX_ASSIGN_OR_RETURN(more, ReadMore(fd.get(), socket_path, options, raw));
  }
}

}  // namespace safex::serve
