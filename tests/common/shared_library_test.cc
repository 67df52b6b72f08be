// common/shared_library.h: a library loaded when first needed fills every slot, or refuses with
// the package to install and fills none the caller may use.
#include "common/shared_library.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

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

// A SharedLibrary is opened by its first Load, from however many threads; every later Load
// returns that first answer and resolves nothing more.
TEST(SharedLibraryTest, TheFirstLoadIsTheOnlyOne) {
  SharedLibrary libm("libm.so.6", "libc6");
  double (*cosine)(double) = nullptr;
  std::vector<std::thread> threads;
  std::vector<Status> answers(4);
  for (Status& answer : answers) {
    threads.emplace_back([&] { answer = libm.Load({{"cos", reinterpret_cast<void**>(&cosine)}}); });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& answer : answers) EXPECT_TRUE(answer.ok()) << answer.ToString();
  ASSERT_NE(cosine, nullptr);
  void* never = nullptr;
  EXPECT_TRUE(libm.Load({{"safex_no_such_function", &never}}).ok());
  EXPECT_EQ(never, nullptr);

  SharedLibrary missing("libsafex-does-not-exist.so.7", "safex-nothing");
  const Status first = missing.Load({});
  EXPECT_EQ(first.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(missing.Load({}).message(), first.message());
}

}  // namespace
}  // namespace safex
