// safex-oci's messages for the shim: JSON lines in the file the shim passes with --log (it reads
// the last "error" line back as the reason an operation failed, and shows it to ctr or kubelet),
// or plain lines on stderr when no --log was given. Never on create's own stdout or stderr: those
// are the container's.
#pragma once

#include <string>

namespace safex::supervisor::oci {

class OciLog {
 public:
  OciLog() = default;
  OciLog(std::string path, bool json) : path_(std::move(path)), json_(json) {}
  void Error(const std::string& message) const { Write("error", message); }
  void Warning(const std::string& message) const { Write("warning", message); }
  void Info(const std::string& message) const { Write("info", message); }

 private:
  void Write(const char* level, const std::string& message) const;
  std::string path_;
  bool json_ = true;
};

}  // namespace safex::supervisor::oci
