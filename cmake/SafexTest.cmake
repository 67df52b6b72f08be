# safex_gtest(NAME SOURCES ... LIBS ... LABELS ...)
#   LABELS: unit (fast, unprivileged; also run under ASan+UBSan), integration (real backends, root),
#   containment (the attack suite). ctest -L selects.
include(GoogleTest)
function(safex_gtest name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_LIBS} safex_test_support GTest::gtest_main GTest::gmock)
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
