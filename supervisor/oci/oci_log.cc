#include "supervisor/oci/oci_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/unique_fd.h"
#include "supervisor/oci/container_state.h"

namespace safex::supervisor::oci {

// One line per message, appended whole (O_APPEND, one write) so that concurrent calls of the
// runtime on one log never interleave within a line.
void OciLog::Write(const char* level, const std::string& message) const {
  std::string line;
  if (json_) {
    line = nlohmann::json{{"level", level}, {"msg", message}, {"time", Rfc3339Now()}}.dump(
               -1, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n";
  } else {
    line = "safex-oci: " + std::string(level) + ": " + message + "\n";
  }
  int fd = path_.empty()
               ? -1
               : open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  UniqueFd owner(fd);
  ssize_t ignored = write(fd >= 0 ? fd : STDERR_FILENO, line.data(), line.size());
  (void)ignored;  // nowhere left to report a failed report
}

}  // namespace safex::supervisor::oci
