// The central audit database's schema in PostgreSQL (docs/audit.md, "Fleet"), and what it keeps
// of each event beside its canonical bytes. Internal to the fleet library.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "audit/event_row.h"

namespace safex::fleet::internal {

// safex.meta's schema_version; bumped on any change to the central tables.
inline constexpr int kCentralSchemaVersion = 1;

// Everything `safex audit central init` makes, in one transaction: the schema `safex`, its
// tables, append-only and sequence triggers, the shippers' function, the auditor views, and the
// roles safex_shipper and safex_auditor (made when missing: roles are cluster-wide).
std::string CreateCentralSql();
// The auditor views over every host's events (part of CreateCentralSql).
std::string CentralViewsSql();

// The columns of safex.events after seq that repeat the canonical bytes for the views (a
// projection: verify --central checks each against the decoded bytes), comma-separated, in
// EventColumn order from kColKind.
std::string ProjectedColumnList();

// What the central stores for column `c` of an event: INTEGER columns keep integers; TEXT
// columns keep their text when it is valid UTF-8 without NUL (what PostgreSQL's text accepts),
// and otherwise the text with each offending byte replaced by U+FFFD (the exact bytes are in
// the canonical encoding). A value of the other type is stored as NULL.
audit::SqlValue ProjectValue(audit::EventColumn c, const audit::SqlValue& v);
bool IsIntegerColumn(audit::EventColumn c);

}  // namespace safex::fleet::internal
