#include "drivers/net/libnftables.h"

#include <mutex>

#include "common/shared_library.h"

namespace safex::drivers::net {
namespace {

Libnftables g_nft;

}  // namespace

Status LoadLibnftables() {
  static std::once_flag once;
  static Status loaded;
  std::call_once(once, [] {
#define SAFEX_NFT_SYMBOL(name) LibrarySymbol{#name, reinterpret_cast<void**>(&g_nft.name)},
    loaded = LoadSharedLibrary("libnftables.so.1", "libnftables1",
                               {SAFEX_NFT_FUNCTIONS(SAFEX_NFT_SYMBOL)});
#undef SAFEX_NFT_SYMBOL
  });
  return loaded;
}

const Libnftables& Nft() { return g_nft; }

}  // namespace safex::drivers::net
