#include "drivers/gvisor/runsc.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>

#include "common/unique_fd.h"

namespace safex::drivers::gvisor {

std::string RunscVersionString(std::string_view out) {
  constexpr std::string_view kPrefix = "runsc version ";
  size_t p = out.find(kPrefix);
  if (p == std::string_view::npos) return "";
  std::string_view rest = out.substr(p + kPrefix.size());
  size_t end = rest.find_first_of(" \n\r\t");
  return std::string(rest.substr(0, end));
}

std::optional<int> RunscReleaseDate(std::string_view v) {
  // The date is the first run of 8 digits starting with 20.
  for (size_t i = 0; i + 8 <= v.size(); ++i) {
    bool digits = true;
    for (size_t j = 0; j < 8 && digits; ++j) digits = v[i + j] >= '0' && v[i + j] <= '9';
    bool bounded = (i == 0 || v[i - 1] < '0' || v[i - 1] > '9') &&
                   (i + 8 == v.size() || v[i + 8] < '0' || v[i + 8] > '9');
    if (digits && bounded && v[i] == '2' && v[i + 1] == '0') {
      int date = 0;
      std::from_chars(v.data() + i, v.data() + i + 8, date);
      return date;
    }
  }
  return std::nullopt;
}

}  // namespace safex::drivers::gvisor
