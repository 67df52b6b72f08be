# safex_gtest(NAME SOURCES ... LIBS ... LABELS ...)
#   LABELS: unit (fast, unprivileged; also run under ASan+UBSan), integration (real backends, root),
#   containment (the attack suite). ctest -L selects.
include(GoogleTest)

# Test code is compiled with -Og, the code under test as the build says (-O2 in the release
# build): the optimiser spent two thirds of a test file's compile time on gtest's expanded
# assertions (measured: tests/supervisor/run_cli_test.cc 21.2 s at -O2, 12.7 s at -Og), and tests
# gain nothing from it. -Og keeps _FORTIFY_SOURCE meaningful (it needs optimisation on).
function(safex_test_optimization target)
  if(NOT SAFEX_SANITIZE AND NOT SAFEX_FUZZ)
    target_compile_options(${target} PRIVATE -Og)
  endif()
endfunction()

function(safex_gtest name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_LIBS} safex_test_support GTest::gtest_main GTest::gmock)
  safex_test_optimization(${name})
  # The sanitizer build runs the unit tests only (scripts/test.sh): the others exist as targets (so
  # their CMakeLists can still configure them) but are neither built by default nor registered.
  if(SAFEX_SANITIZE AND NOT "unit" IN_LIST A_LABELS)
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
    return()
  endif()
  set(_lock)
  # Integration and containment tests create sandbox resources on the machine and check for leaks
  # machine-wide (tests/support/leak_check.h), so they never run concurrently with each other.
  if("integration" IN_LIST A_LABELS OR "containment" IN_LIST A_LABELS)
    set(_lock RESOURCE_LOCK safex_host)
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT} ${_lock})
endfunction()
