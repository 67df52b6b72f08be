#include "supervisor/run_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>

#include "common/sha256.h"

namespace safex::supervisor {

Result<std::string> NewRunId() {
  uint8_t bytes[8];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("getrandom", errno);
    }
    got += static_cast<size_t>(n);
  }
  return ToHex(bytes, sizeof(bytes));
}

bool IsValidRunId(const std::string& id) {
  if (id.size() != 16) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace safex::supervisor
