#include "audit/time_format.h"

#include <charconv>
#include <cstdio>
#include <ctime>

namespace safex::audit {
namespace {

constexpr int64_t kNsPerSec = 1'000'000'000;

// Reads exactly n decimal digits at s[*pos].
bool Digits(std::string_view s, size_t* pos, size_t n, int* out) {
  if (*pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool Expect(std::string_view s, size_t* pos, char c) {
  if (*pos < s.size() && s[*pos] == c) {
    ++*pos;
    return true;
  }
  return false;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool IsLeap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

Status Bad(std::string_view text, const char* why) {
  return Status::InvalidArgument("bad time \"" + std::string(text) + "\": " + why +
                                 " (use e.g. 2026-11-29, 2026-11-29T22:26:00Z or 7d)");
}

}  // namespace

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

std::string FormatIso8601(int64_t unix_ns) {
  int64_t secs = unix_ns / kNsPerSec;
  int64_t rem = unix_ns % kNsPerSec;
  if (rem < 0) {
    rem += kNsPerSec;
    --secs;
  }
  time_t t = static_cast<time_t>(secs);
  tm utc{};
  gmtime_r(&t, &utc);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(rem / 1'000'000));
  return buf;
}

Result<int64_t> ParseTimeArg(std::string_view text, int64_t now_ns) {
  if (text == "now") return now_ns;
  if (text.empty()) return Bad(text, "empty");
  // Relative: digits then one unit letter.
  const char unit = text.back();
  if (text.size() >= 2 && text.find_first_not_of("0123456789") == text.size() - 1) {
    int64_t mult = 0;
    switch (unit) {
      case 's':
        mult = 1;
        break;
      case 'm':
        mult = 60;
        break;
      case 'h':
        mult = 3600;
        break;
      case 'd':
        mult = 86400;
        break;
      case 'w':
        mult = 7 * 86400;
        break;
      default:
        return Bad(text, "unknown unit (s, m, h, d or w)");
    }
    int64_t n = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size() - 1, n);
    (void)p;
    // 200 years is plenty; beyond that the nanoseconds would overflow.
    if (ec != std::errc() || n > 200LL * 366 * 86400 / mult) return Bad(text, "too far back");
    return now_ns - n * mult * kNsPerSec;
  }

  size_t pos = 0;
  int year, mon, day, hour = 0, min = 0, sec = 0;
  if (!Digits(text, &pos, 4, &year) || !Expect(text, &pos, '-') || !Digits(text, &pos, 2, &mon) ||
      !Expect(text, &pos, '-') || !Digits(text, &pos, 2, &day)) {
    return Bad(text, "expected YYYY-MM-DD");
  }
  if (year < 1970 || mon < 1 || mon > 12 || day < 1) return Bad(text, "date out of range");
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int mdays = kDays[mon - 1] + (mon == 2 && IsLeap(year) ? 1 : 0);
  if (day > mdays) return Bad(text, "no such day");
  int64_t frac_ns = 0;
  int64_t offset_s = 0;
  if (pos < text.size()) {
    if (!Expect(text, &pos, 'T') && !Expect(text, &pos, ' ')) return Bad(text, "expected T");
    if (!Digits(text, &pos, 2, &hour) || !Expect(text, &pos, ':') || !Digits(text, &pos, 2, &min)) {
      return Bad(text, "expected HH:MM");
    }
    if (Expect(text, &pos, ':')) {
      if (!Digits(text, &pos, 2, &sec)) return Bad(text, "expected seconds");
      if (Expect(text, &pos, '.') || Expect(text, &pos, ',')) {
        int64_t scale = 100'000'000;
        size_t start = pos;
        while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
          frac_ns += (text[pos] - '0') * scale;
          scale /= 10;
          ++pos;
        }
        if (pos == start) return Bad(text, "expected fraction digits");
      }
    }
    if (hour > 23 || min > 59 || sec > 60) return Bad(text, "time of day out of range");
    if (Expect(text, &pos, 'Z') || Expect(text, &pos, 'z')) {
      // UTC
    } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
      int sign = text[pos] == '-' ? -1 : 1;
      ++pos;
      int oh, om;
      if (!Digits(text, &pos, 2, &oh) || !Expect(text, &pos, ':') || !Digits(text, &pos, 2, &om) ||
          oh > 23 || om > 59) {
        return Bad(text, "expected a zone offset +HH:MM");
      }
      offset_s = sign * (oh * 3600 + om * 60);
    }
  }
  if (pos != text.size()) return Bad(text, "unexpected trailing text");
  int64_t days = DaysFromCivil(year, static_cast<unsigned>(mon), static_cast<unsigned>(day));
  int64_t secs = days * 86400 + hour * 3600 + min * 60 + sec - offset_s;
  if (secs < 0 || secs > 9'000'000'000LL) return Bad(text, "out of range");
  return secs * kNsPerSec + frac_ns;
}

}  // namespace safex::audit
