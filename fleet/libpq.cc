#include "fleet/libpq.h"

#include "common/shared_library.h"

namespace safex::fleet::internal {
namespace {

Libpq g_libpq;

}  // namespace

Status LoadLibpq() {
  static SharedLibrary libpq("libpq.so.5", "libpq5");
#define SAFEX_LIBPQ_SYMBOL(name) LibrarySymbol{#name, reinterpret_cast<void**>(&g_libpq.name)},
  return libpq.Load({SAFEX_LIBPQ_FUNCTIONS(SAFEX_LIBPQ_SYMBOL)});
#undef SAFEX_LIBPQ_SYMBOL
}

const Libpq& Pq() { return g_libpq; }

}  // namespace safex::fleet::internal
