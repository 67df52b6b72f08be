#include "fleet/libpq.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace safex::fleet::internal {
namespace {

constexpr const char* kSoname = "libpq.so.5";

Libpq g_libpq;
Status g_loaded = Status::FailedPrecondition("libpq not loaded yet");

// dlopen and every symbol; the first failure is the answer (nothing half-loaded is used).
Status Load() {
  void* lib = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return Status::FailedPrecondition(
        std::string("the fleet audit needs libpq (Debian: libpq5): ") +
        (why != nullptr ? why : kSoname));
  }
  std::string missing;
#define SAFEX_LIBPQ_RESOLVE(name)                                        \
  g_libpq.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name)); \
  if (g_libpq.name == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#name);
  SAFEX_LIBPQ_FUNCTIONS(SAFEX_LIBPQ_RESOLVE)
#undef SAFEX_LIBPQ_RESOLVE
  if (!missing.empty()) {
    return Status::FailedPrecondition(std::string(kSoname) + " lacks " + missing +
                                      " (too old a libpq5?)");
  }
  return Status::Ok();
}

}  // namespace

Status LoadLibpq() {
  static std::once_flag once;
  std::call_once(once, [] { g_loaded = Load(); });
  return g_loaded;
}

const Libpq& Pq() { return g_libpq; }

}  // namespace safex::fleet::internal
