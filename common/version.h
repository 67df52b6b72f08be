// This build's version: CMakeLists.txt's project(VERSION), passed in by common/CMakeLists.txt,
// so that `safex --version`, the service's /v1/health and exported events cannot disagree.
#pragma once

namespace safex {

inline constexpr char kSafexVersion[] = SAFEX_VERSION;

}  // namespace safex
