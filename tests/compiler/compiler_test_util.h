// Helpers for compiler tests: a temporary directory of policy files, and diagnostic summaries.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/compiler.h"

namespace safex::compiler::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/safex-compiler-test.XXXXXX";
    char* p = mkdtemp(tmpl);
    EXPECT_NE(p, nullptr);
    path_ = p ? p : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  std::string path_;
};

// "E045 4:5" for each diagnostic (errors and warnings), in order.
inline std::vector<std::string> Codes(const CompileResult& r) {
  std::vector<std::string> out;
  for (const auto& d : r.diagnostics) {
    out.push_back(d.code + " " + std::to_string(d.span.begin.line) + ":" +
                  std::to_string(d.span.begin.column));
  }
  return out;
}

inline std::vector<std::string> CodesOnly(const CompileResult& r) {
  std::vector<std::string> out;
  for (const auto& d : r.diagnostics) out.push_back(d.code);
  return out;
}

// A complete, valid untrusted policy body (inside `policy "NAME" { ... }`).
inline std::string Body() {
  return R"(  trust = untrusted
  isolation = gvisor
  limits {
    wall_time = 30s
    cpu_time = 20s
    memory = 512MiB
    pids = 64
    open_files = 256
    output = 1MiB
    disk = 64MiB
    cpus = 1
  }
  rootfs host_readonly ["/usr", "/lib"]
  mount tmpfs at "/tmp" { size = 64MiB }
  mount input at "/in"
  mount output at "/out" { size = 16MiB }
  outputs {
    max_files = 16
    max_total = 16MiB
  }
  network {
    egress "pypi.org:443"
  }
  env {
    set LANG = "C.UTF-8"
  }
  syscalls {
    deny [ptrace, bpf]
  }
  validate stdout { max = 64KiB }
)";
}

inline std::string Policy(const std::string& name, const std::string& extra = "",
                          const std::string& extends = "") {
  std::string head = "policy \"" + name + "\"";
  if (!extends.empty()) head += " extends \"" + extends + "\"";
  return head + " {\n" + (extends.empty() ? Body() : "") + extra + "}\n";
}

}  // namespace safex::compiler::testing
