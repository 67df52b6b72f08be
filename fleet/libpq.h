// libpq, loaded when the fleet audit first connects, not when safex starts (internal to fleet/;
// common/shared_library.h says why). Only `safex audit central|ship|verify --central` and the
// service's shipping timer use it; a host without libpq5 runs everything else.
#pragma once

#include <libpq-fe.h>

#include "common/shared_library.h"
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
  SAFEX_LIBPQ_FUNCTIONS(SAFEX_LIBRARY_FUNCTION)
};

// Loads libpq (libpq.so.5) the first time; later calls return the same answer (FailedPrecondition
// naming the package when it is not installed or lacks a function).
Status LoadLibpq();

// The loaded functions. REQUIRES: LoadLibpq() returned Ok (every PgConn was made after it did).
const Libpq& Pq();

}  // namespace safex::fleet::internal
