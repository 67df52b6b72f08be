// A shared library loaded when a feature first needs it, not at every start of `safex`.
//
// Why: every library the binary links is mapped and bound (BIND_NOW) before main() of every
// command. libpq (the fleet audit) and libnftables (egress rules) brought 25 libraries between
// them for features most commands never use, and cost `safex check` and `safex submit` several
// milliseconds each (docs/benchmarks.md). Loaded here by soname with dlopen: the dynamic loader's
// own search over the system's library path, with the same trust (safex is not setuid; whoever
// can set LD_LIBRARY_PATH for root already chooses every library safex loads). RTLD_NOW, so a
// missing symbol fails at the load, once; never unloaded.
#pragma once

#include <initializer_list>
#include <mutex>

#include "common/status.h"

namespace safex {

// One function to resolve: its name and where its address goes (a function pointer's storage,
// filled as dlsym's manual page shows).
struct LibrarySymbol {
  const char* name;
  void** slot;
};

// A member of a table of a library's functions, typed from the library's own header:
// `struct Table { LIST(SAFEX_LIBRARY_FUNCTION) };` for an X-macro LIST of function names.
#define SAFEX_LIBRARY_FUNCTION(name) decltype(&::name) name = nullptr;

// Opens `soname` and fills every slot. FailedPrecondition naming `package` (Debian's) when the
// library is not installed or lacks a symbol; no slot is to be used then. Not guarded against
// concurrent calls: SharedLibrary::Load is.
Status LoadSharedLibrary(const char* soname, const char* package,
                         std::initializer_list<LibrarySymbol> symbols);

// One library loaded at most once per process, however many threads ask: the first Load() opens
// it (LoadSharedLibrary) and every later one returns that first answer.
class SharedLibrary {
 public:
  SharedLibrary(const char* soname, const char* package) : soname_(soname), package_(package) {}
  Status Load(std::initializer_list<LibrarySymbol> symbols);

 private:
  const char* soname_;
  const char* package_;
  std::once_flag once_;
  Status loaded_;
};

}  // namespace safex
