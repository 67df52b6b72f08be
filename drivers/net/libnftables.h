// libnftables, loaded when a run's egress rules are first written, not when safex starts
// (internal to drivers/net/; common/shared_library.h says why: it and libmnl, libnftnl,
// libxtables, libjansson and libgmp were loaded by every command, for egress plans only).
#pragma once

#include <nftables/libnftables.h>

#include "common/shared_library.h"
#include "common/status.h"

namespace safex::drivers::net {

// Every libnftables function nft.cc calls, through Nft().
// clang-format off
#define SAFEX_NFT_FUNCTIONS(X) \
  X(nft_ctx_new) X(nft_ctx_free) X(nft_ctx_buffer_output) X(nft_ctx_buffer_error) \
  X(nft_ctx_get_output_buffer) X(nft_ctx_get_error_buffer) X(nft_run_cmd_from_buffer)
// clang-format on

struct Libnftables {
  SAFEX_NFT_FUNCTIONS(SAFEX_LIBRARY_FUNCTION)
};

// Loads libnftables (libnftables.so.1) the first time; later calls return the same answer
// (FailedPrecondition naming the package when it is missing: the run is refused, fail closed).
Status LoadLibnftables();

// The loaded functions. REQUIRES: LoadLibnftables() returned Ok.
const Libnftables& Nft();

}  // namespace safex::drivers::net
