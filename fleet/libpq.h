// libpq, loaded when the fleet audit first connects, not when safex starts (internal to fleet/).
//
// Why: libpq pulls 19 more shared libraries into the process (Kerberos, LDAP, SASL, GnuTLS and
// theirs), which the dynamic loader maps and binds (BIND_NOW) at every start of every `safex`
// command: `safex submit`, `safex run` and `safex check` paid about 2-3 ms of CPU and latency
// each for a library only `safex audit central|ship|verify --central` and the service's shipping
// timer use. Loaded here with dlopen by its soname (the same search as the dynamic loader's, the
// same trust in the system's library path; safex is not setuid, and an environment that could set
// LD_LIBRARY_PATH for root already chooses every library safex loads), RTLD_NOW so that a missing
// symbol fails here, once, and never unloaded.
#pragma once

#include <libpq-fe.h>

#include "common/status.h"

namespace safex::fleet::internal {

// Every libpq function fleet/ calls: pg.cc calls them through Pq().
// clang-format off
#define SAFEX_LIBPQ_FUNCTIONS(X) \
  X(PQclear) X(PQconnectdbParams) X(PQconninfoFree) X(PQconninfoParse) \
  X(PQerrorMessage) X(PQexec) X(PQexecParams) X(PQfinish) \
  X(PQfreemem) X(PQgetResult) X(PQgetisnull) X(PQgetlength) \
  X(PQgetvalue) X(PQntuples) X(PQputCopyData) X(PQputCopyEnd) \
  X(PQresultErrorField) X(PQresultStatus) X(PQsetNoticeProcessor) X(PQstatus) \
  X(PQuser)
// clang-format on

struct Libpq {
#define SAFEX_LIBPQ_MEMBER(name) decltype(&::name) name = nullptr;
  SAFEX_LIBPQ_FUNCTIONS(SAFEX_LIBPQ_MEMBER)
#undef SAFEX_LIBPQ_MEMBER
};

// Loads libpq (libpq.so.5) the first time; later calls return the same answer. FailedPrecondition
// naming the package when it is not installed or lacks a function.
Status LoadLibpq();

// The loaded functions. REQUIRES: LoadLibpq() returned Ok (every PgConn was made after it did).
const Libpq& Pq();

}  // namespace safex::fleet::internal
