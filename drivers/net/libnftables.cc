#include "drivers/net/libnftables.h"

#include "common/shared_library.h"

namespace safex::drivers::net {
namespace {

Libnftables g_nft;

}  // namespace

Status LoadLibnftables() {
  static SharedLibrary libnftables("libnftables.so.1", "libnftables1");
#define SAFEX_NFT_SYMBOL(name) LibrarySymbol{#name, reinterpret_cast<void**>(&g_nft.name)},
  return libnftables.Load({SAFEX_NFT_FUNCTIONS(SAFEX_NFT_SYMBOL)});
#undef SAFEX_NFT_SYMBOL
}

const Libnftables& Nft() { return g_nft; }

}  // namespace safex::drivers::net
