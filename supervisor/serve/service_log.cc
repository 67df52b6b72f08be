#include "supervisor/serve/service_log.h"

#include <cstdlib>
#include <memory>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace safex::serve {
namespace {

// "%*": the syslog priority prefix that journald turns into the line's priority.
class JournalPriority : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const char* p = msg.level >= spdlog::level::err    ? "<3>"
                    : msg.level == spdlog::level::warn ? "<4>"
                                                       : "<6>";
    dest.append(p, p + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JournalPriority>();
  }
};

std::shared_ptr<spdlog::logger> MakeLogger() {
  // stderr, unbuffered per line, no colours (a journal or a file, not a terminal).
  auto logger = std::make_shared<spdlog::logger>(
      "safex-serve", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  if (std::getenv("JOURNAL_STREAM") != nullptr) {
    formatter->add_flag<JournalPriority>('*').set_pattern("%*%v");  // journald adds the time
  } else {
    formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ safex serve [%l] %v");
  }
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  return logger;
}

spdlog::logger& Logger() {
  static const std::shared_ptr<spdlog::logger> logger = MakeLogger();
  return *logger;
}

}  // namespace

void ServeLog(Severity severity, const std::string& line) {
  switch (severity) {
    case Severity::kInfo: Logger().info(line); break;
    case Severity::kWarning: Logger().warn(line); break;
    case Severity::kError: Logger().error(line); break;
  }
}

}  // namespace safex::serve
