// common/shared_library.h: a library loaded when first needed fills every slot, or refuses with
// the package to install and fills none the caller may use.
#include "common/shared_library.h"

#include <gtest/gtest.h>

#include <cmath>

namespace safex {
namespace {

TEST(SharedLibraryTest, LoadsAndResolvesEveryFunction) {
  double (*cosine)(double) = nullptr;
  double (*square_root)(double) = nullptr;
  Status st = LoadSharedLibrary("libm.so.6", "libc6",
                                {{"cos", reinterpret_cast<void**>(&cosine)},
                                 {"sqrt", reinterpret_cast<void**>(&square_root)}});
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_NE(cosine, nullptr);
  ASSERT_NE(square_root, nullptr);
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
  EXPECT_DOUBLE_EQ(square_root(16.0), 4.0);
}

TEST(SharedLibraryTest, AMissingLibraryNamesItsPackage) {
  void* slot = nullptr;
  Status st =
      LoadSharedLibrary("libsafex-does-not-exist.so.7", "safex-nothing", {{"anything", &slot}});
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("libsafex-does-not-exist.so.7"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("safex-nothing"), std::string::npos) << st.message();
}

TEST(SharedLibraryTest, AMissingFunctionIsNamedAndRefused) {
  void* present = nullptr;
  void* absent = nullptr;
  Status st = LoadSharedLibrary("libm.so.6", "libc6",
                                {{"cos", &present}, {"safex_no_such_function", &absent}});
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("safex_no_such_function"), std::string::npos) << st.message();
  EXPECT_EQ(absent, nullptr);
}

}  // namespace
}  // namespace safex
