#include "common/shared_library.h"

#include <dlfcn.h>

#include <string>

namespace safex {

Status LoadSharedLibrary(const char* soname, const char* package,
                         std::initializer_list<LibrarySymbol> symbols) {
  void* lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return Status::FailedPrecondition(std::string("cannot load ") + soname + " (Debian: " +
                                      package + "): " + (why != nullptr ? why : "not found"));
  }
  std::string missing;
  for (const LibrarySymbol& s : symbols) {
    *s.slot = dlsym(lib, s.name);
    if (*s.slot == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(s.name);
  }
  if (!missing.empty()) {
    return Status::FailedPrecondition(std::string(soname) + " lacks " + missing + " (too old a " +
                                      package + "?)");
  }
  return Status::Ok();
}

Status SharedLibrary::Load(std::initializer_list<LibrarySymbol> symbols) {
  std::call_once(once_, [&] { loaded_ = LoadSharedLibrary(soname_, package_, symbols); });
  return loaded_;
}

}  // namespace safex
