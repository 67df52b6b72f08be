// The project's UTF-8 decoder lives in common/utf8.h; the output validators use it by these names.
#pragma once

#include "common/utf8.h"

namespace safex::output {
using safex::DecodeUtf8;
using safex::IsBidiControl;
using safex::IsInvisibleFormat;
using safex::IsValidUtf8;
using safex::Utf8Char;
using safex::Utf8Status;
}  // namespace safex::output
