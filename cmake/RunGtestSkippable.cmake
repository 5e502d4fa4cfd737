# CTest driver of a GoogleTest run whose cases may all skip themselves (GTEST_SKIP, e.g. on a
# machine without a GPU). Passes the binary's output through; fails as the binary fails; and where
# the binary succeeded with no case passed and some skipped, prints a line that the test's
# SKIP_REGULAR_EXPRESSION ("SKIPPED: every case") matches, so that CTest's summary says the test
# did not run instead of counting it as passed.
#
#   cmake -DTEST_BINARY=<path> -DFILTER=<gtest filter> -P RunGtestSkippable.cmake
execute_process(COMMAND "${TEST_BINARY}" "--gtest_filter=${FILTER}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
message("${_out}")
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${TEST_BINARY} --gtest_filter=${FILTER} failed (${_rc})")
endif()
if(_out MATCHES "\\[  PASSED  \\] 0 tests\\." AND _out MATCHES "\\[  SKIPPED \\] [0-9]+ tests?,")
  # The reasons the cases gave (the line after each "Skipped").
  string(REGEX MATCHALL "Skipped\n[^\n]*" _why "${_out}")
  list(REMOVE_DUPLICATES _why)
  string(REPLACE "Skipped\n" "" _why "${_why}")
  message("SKIPPED: every case of ${FILTER} skipped itself (${_why})")
endif()
