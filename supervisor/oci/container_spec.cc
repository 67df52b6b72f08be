#include "supervisor/oci/container_spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/unique_fd.h"

namespace safex::supervisor::oci {
namespace {

using nlohmann::json;

constexpr size_t kMaxSpecBytes = 4 << 20;

// Throws json::type_error through nlohmann for a wrong type; ParseContainerSpec turns it into
// InvalidArgument.
std::vector<std::string> Strings(const json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || j[key].is_null()) return out;
  if (!j[key].is_array()) throw std::invalid_argument(std::string(key) + " is not an array");
  for (const json& s : j.at(key)) out.push_back(s.get<std::string>());
  return out;
}

std::optional<int64_t> Int(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<int64_t>();
}

void Process(const json& p, ContainerSpec& s) {
  s.args = Strings(p, "args");
  s.env = Strings(p, "env");
  if (p.contains("cwd")) s.cwd = p["cwd"].get<std::string>();
  s.terminal = p.value("terminal", false);
  if (p.contains("user")) {
    s.uid = p["user"].value("uid", 0u);
    s.gid = p["user"].value("gid", 0u);
  }
  if (p.contains("capabilities") && p["capabilities"].is_object()) {
    for (const auto& [set, names] : p["capabilities"].items()) {
      for (const json& n : names) {
        std::string cap = n.get<std::string>();
        if (std::find(s.capabilities.begin(), s.capabilities.end(), cap) == s.capabilities.end())
          s.capabilities.push_back(cap);
      }
    }
  }
}

void Linux(const json& l, ContainerSpec& s) {
  if (l.contains("namespaces")) {
    for (const json& n : l["namespaces"]) {
      s.namespaces.push_back({n.at("type").get<std::string>(), n.value("path", "")});
    }
  }
  if (l.contains("devices")) {
    for (const json& d : l["devices"]) s.devices.push_back(d.value("path", "?"));
  }
  s.cgroups_path = l.value("cgroupsPath", "");
  s.has_seccomp = l.contains("seccomp") && !l["seccomp"].is_null();
  if (!l.contains("resources")) return;
  const json& r = l["resources"];
  if (r.contains("memory")) s.memory_limit = Int(r["memory"], "limit");
  if (r.contains("pids")) s.pids_limit = Int(r["pids"], "limit");
  if (r.contains("cpu")) {
    s.cpu_quota = Int(r["cpu"], "quota");
    if (r["cpu"].contains("period") && !r["cpu"]["period"].is_null())
      s.cpu_period = r["cpu"]["period"].get<int64_t>();
  }
}

std::string Annotation(const ContainerSpec& s, const char* key) {
  auto it = s.annotations.find(key);
  return it == s.annotations.end() ? "" : it->second;
}

}  // namespace

bool SpecMount::IsBind() const {
  if (type == "bind") return true;
  return std::find(options.begin(), options.end(), "bind") != options.end() ||
         std::find(options.begin(), options.end(), "rbind") != options.end();
}

Result<ContainerSpec> ParseContainerSpec(std::string_view text) {
  ContainerSpec s;
  try {
    json j = json::parse(text);
    if (!j.is_object()) return Status::InvalidArgument("config.json is not a JSON object");
    if (!j.contains("process")) return Status::InvalidArgument("config.json has no process");
    Process(j["process"], s);
    if (s.args.empty()) return Status::InvalidArgument("config.json: process.args is empty");
    if (j.contains("root")) {
      s.root_path = j["root"].value("path", "");
      s.root_readonly = j["root"].value("readonly", false);
    }
    if (j.contains("mounts")) {
      for (const json& m : j["mounts"]) {
        s.mounts.push_back({m.at("destination").get<std::string>(), m.value("type", ""),
                            m.value("source", ""), Strings(m, "options")});
      }
    }
    if (j.contains("linux")) Linux(j["linux"], s);
    if (j.contains("annotations")) {
      for (const auto& [k, v] : j["annotations"].items()) s.annotations[k] = v.get<std::string>();
    }
  } catch (const std::exception& e) {  // json's type errors and Strings' own
    return Status::InvalidArgument(std::string("config.json: ") + e.what());
  }
  return s;
}

Result<ContainerSpec> LoadContainerSpec(const std::string& bundle) {
  std::string path = bundle + "/config.json";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return Status::Errno("open", path, errno);
  UniqueFd owner(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::Errno("fstat", path, errno);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxSpecBytes) {
    return Status::InvalidArgument(path + " is larger than 4 MiB");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Errno("read", path, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return ParseContainerSpec(text);
}

PodIdentity PodIdentityOf(const ContainerSpec& s) {
  PodIdentity p;
  p.kube_namespace = Annotation(s, "io.kubernetes.cri.sandbox-namespace");
  p.pod = Annotation(s, "io.kubernetes.cri.sandbox-name");
  p.container = Annotation(s, "io.kubernetes.cri.container-name");
  p.image = Annotation(s, "io.kubernetes.cri.image-name");
  p.container_type = Annotation(s, "io.kubernetes.cri.container-type");
  p.sandbox_id = Annotation(s, "io.kubernetes.cri.sandbox-id");
  return p;
}

}  // namespace safex::supervisor::oci
