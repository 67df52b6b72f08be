// A temporary directory for a test, removed (recursively) when the object goes.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace safex::testing {

class TempDir {
 public:
  // Not /tmp/safex-*: the leak checker treats those as the product's own temp dirs.
  explicit TempDir(const std::string& prefix = "/tmp/sxtest-") {
    std::string tmpl = prefix + "XXXXXX";
    char* p = mkdtemp(tmpl.data());
    path_ = p != nullptr ? std::string(p) : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = Join(name);
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  std::string path_;
};

}  // namespace safex::testing
