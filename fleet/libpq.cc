#include "fleet/libpq.h"

#include <mutex>

#include "common/shared_library.h"

namespace safex::fleet::internal {
namespace {

Libpq g_libpq;

}  // namespace

Status LoadLibpq() {
  static std::once_flag once;
  static Status loaded;
  std::call_once(once, [] {
#define SAFEX_LIBPQ_SYMBOL(name) LibrarySymbol{#name, reinterpret_cast<void**>(&g_libpq.name)},
    loaded = LoadSharedLibrary("libpq.so.5", "libpq5", {SAFEX_LIBPQ_FUNCTIONS(SAFEX_LIBPQ_SYMBOL)});
#undef SAFEX_LIBPQ_SYMBOL
  });
  return loaded;
}

const Libpq& Pq() { return g_libpq; }

}  // namespace safex::fleet::internal
