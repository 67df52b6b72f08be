#include "dsl/diagnostics.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/text.h"

namespace safex::dsl {
namespace {

// Source lines wider than this are shown as a window around the caret, so a hostile 1 MiB line
// cannot flood a terminal.
constexpr size_t kMaxShownWidth = 120;
constexpr size_t kWindowBefore = 40;
constexpr size_t kMaxScanBytes = 2048;

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kNote:
      return "note";
  }
  return "error";
}

// One source character as it is shown: its escaped text and how wide it is. Tabs stay tabs (so
// the caret line, which copies them, lines up in any terminal).
struct Shown {
  size_t byte;       // offset of the character in the line
  std::string text;  // what is printed
  size_t width;      // columns, tabs counted as 1 (they are reproduced, not measured)
  bool tab;
};

std::vector<Shown> ShowLine(std::string_view line) {
  std::vector<Shown> out;
  out.reserve(line.size());
  for (size_t i = 0; i < line.size();) {
    char32_t cp;
    size_t n = text::DecodeUtf8(line, i, &cp);
    Shown s{i, "", 1, false};
    if (n == 0) {
      n = 1;
      s.text = text::EscapeForTerminal(line.substr(i, 1));
    } else if (cp == '\t') {
      s.text = "\t";
      s.tab = true;
    } else {
      s.text = text::EscapeForTerminal(line.substr(i, n));
    }
    if (!s.tab) s.width = text::Utf8Length(s.text);
    out.push_back(std::move(s));
    i += n;
  }
  return out;
}

// The text of the line of `at` without its line terminator, or false when there is none.
bool FindLine(std::string_view source, const Position& at, std::string_view* line, size_t* start) {
  size_t pos = 0;
  // Fast path: the offset, when it agrees with the column, gives the line start directly (the
  // parser sets all three; other phases may leave the offset 0).
  const uint64_t line_start = at.offset - (at.column - 1);
  if (at.column >= 1 && at.offset >= at.column - 1 && at.offset <= source.size() &&
      (line_start == 0 ? at.line == 1 : source[line_start - 1] == '\n')) {
    pos = static_cast<size_t>(line_start);
  } else {
    for (uint32_t l = 1; l < at.line; ++l) {
      const size_t nl = source.find('\n', pos);
      if (nl == std::string_view::npos) return false;
      pos = nl + 1;
    }
  }
  const uint32_t number = at.line;
  if (pos > source.size() || (pos == source.size() && number > 1 && source.back() == '\n')) {
    // The position just past a final newline: show it as an empty line.
    *line = std::string_view();
    *start = pos;
    return true;
  }
  size_t end = source.find('\n', pos);
  if (end == std::string_view::npos) end = source.size();
  if (end > pos && source[end - 1] == '\r') --end;
  *line = source.substr(pos, end - pos);
  *start = pos;
  return true;
}

}  // namespace

std::string RenderDiagnostic(const Diagnostic& d, std::string_view source) {
  std::string out;
  if (!d.path.empty()) {
    out += text::EscapeForTerminal(d.path);
    out +=
        ':' + std::to_string(d.span.begin.line) + ':' + std::to_string(d.span.begin.column) + ": ";
  }
  out += SeverityName(d.severity);
  if (!d.code.empty()) out += "[" + text::EscapeForTerminal(d.code) + "]";
  out += ": " + text::EscapeForTerminal(d.message) + "\n";

  std::string_view line;
  size_t line_start = 0;
  if (!source.empty() && d.span.begin.line >= 1 &&
      FindLine(source, d.span.begin, &line, &line_start)) {
    // The underlined characters, in bytes of the line: [first, last).
    size_t first = std::min<size_t>(d.span.begin.column - 1, line.size());
    size_t last = line.size();
    if (d.span.end.line == d.span.begin.line && d.span.end.column > d.span.begin.column) {
      last = std::min<size_t>(d.span.end.column - 1, line.size());
    }
    // On a very long line, only look at bytes near the caret (the window below is narrower).
    bool cut_front = false;
    bool cut_back = false;
    if (line.size() > kMaxScanBytes) {
      size_t from = first > kMaxScanBytes / 4 ? first - kMaxScanBytes / 4 : 0;
      while (from > 0 && (static_cast<uint8_t>(line[from]) & 0xC0) == 0x80) --from;
      size_t to = std::min(line.size(), from + kMaxScanBytes);
      while (to < line.size() && (static_cast<uint8_t>(line[to]) & 0xC0) == 0x80) ++to;
      cut_front = from > 0;
      cut_back = to < line.size();
      line = line.substr(from, to - from);
      first -= from;
      last = std::min(last - std::min(last, from), line.size());
      if (last < first) last = first;
    }
    const std::vector<Shown> shown = ShowLine(line);
    // Index of the first shown character at or after byte `first`.
    auto index_of = [&](size_t byte) {
      return static_cast<size_t>(
          std::lower_bound(shown.begin(), shown.end(), byte,
                           [](const Shown& s, size_t b) { return s.byte < b; }) -
          shown.begin());
    };
    const size_t caret_from = index_of(first);
    size_t caret_to = index_of(last);  // exclusive

    // Choose the window of characters to show.
    size_t total_width = 0;
    for (const Shown& s : shown) total_width += s.width;
    size_t from = 0;
    size_t to = shown.size();
    if (total_width > kMaxShownWidth) {
      from = caret_from > kWindowBefore ? caret_from - kWindowBefore : 0;
      size_t width = 0;
      to = from;
      while (to < shown.size() && width + shown[to].width <= kMaxShownWidth) {
        width += shown[to].width;
        ++to;
      }
    }
    const std::string lead = from > 0 || cut_front ? "..." : "";
    std::string src_line = lead;
    std::string caret_line(lead.size(), ' ');
    for (size_t i = from; i < to; ++i) {
      src_line += shown[i].text;
      if (i < caret_from) {
        caret_line += shown[i].tab ? std::string("\t") : std::string(shown[i].width, ' ');
      } else if (i < caret_to) {
        caret_line += std::string(std::max<size_t>(shown[i].width, 1), '^');
      }
    }
    if (to < shown.size() || cut_back) src_line += "...";
    if (caret_from >= to) {
      // The span starts past the window or at the end of the line: one caret after the text.
      caret_line += '^';
    } else if (caret_to <= caret_from) {
      caret_line += '^';
    }
    out += src_line + "\n" + caret_line + "\n";
  }
  if (!d.help.empty()) out += "help: " + text::EscapeForTerminal(d.help) + "\n";
  return out;
}

std::string ClosestMatch(std::string_view word, const std::vector<std::string_view>& candidates) {
  // Bounded: suggestions are for typos in short words, and a hostile 4 KiB identifier must not
  // cost 4 KiB x 4 KiB per candidate.
  constexpr size_t kMaxLen = 64;
  if (word.empty() || word.size() > kMaxLen) return "";
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string w = lower(word);
  const size_t threshold = w.size() <= 3 ? 1 : (w.size() <= 6 ? 2 : 3);
  std::string_view best;
  size_t best_distance = threshold + 1;
  std::vector<size_t> prev2, prev, cur;
  for (std::string_view cand : candidates) {
    if (cand.empty() || cand.size() > kMaxLen || cand == word) continue;
    const std::string c = lower(cand);
    // Optimal string alignment distance (Levenshtein plus adjacent transpositions).
    const size_t n = w.size();
    const size_t m = c.size();
    if ((n > m ? n - m : m - n) > threshold) continue;
    prev2.assign(m + 1, 0);
    prev.resize(m + 1);
    cur.resize(m + 1);
    for (size_t j = 0; j <= m; ++j) prev[j] = j;
    for (size_t i = 1; i <= n; ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= m; ++j) {
        const size_t cost = w[i - 1] == c[j - 1] ? 0 : 1;
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
        if (i > 1 && j > 1 && w[i - 1] == c[j - 2] && w[i - 2] == c[j - 1]) {
          cur[j] = std::min(cur[j], prev2[j - 2] + 1);
        }
      }
      prev2 = prev;
      prev = cur;
    }
    const size_t distance = prev[m];
    if (distance < best_distance) {
      best_distance = distance;
      best = cand;
    }
  }
  return std::string(best);
}

}  // namespace safex::dsl
