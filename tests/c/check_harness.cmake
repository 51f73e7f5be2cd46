# Checks the exit status and output of tests/c/check.h's SUMMARY (run by ctest as test_check_harness):
#   cmake -DPROG=path/to/harness_selftest -P check_harness.cmake
# A file whose tests all pass exits 0; one where some test skipped (and none failed) exits 77, which
# ctest reports as "Skipped" (SKIP_RETURN_CODE), printing the reason; any failure exits 1.
function(expect args want_rc want_text)
  execute_process(COMMAND ${PROG} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL want_rc)
    message(FATAL_ERROR "harness_selftest ${args}: exit ${rc}, wanted ${want_rc}\n${err}")
  endif()
  string(FIND "${err}" "${want_text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "harness_selftest ${args}: output lacks \"${want_text}\"\n${err}")
  endif()
endfunction()

expect("pass;pass" 0 "2 tests, 2 passed, 0 failed, 0 skipped")
expect("pass;skip" 77 "SKIP: the reason given by the test (42)")
expect("pass;skip" 77 "2 tests, 1 passed, 0 failed, 1 skipped (exit 77")
expect("skip;skip" 77 "2 tests, 0 passed, 0 failed, 2 skipped")
expect("pass;skip;fail" 1 "3 tests, 1 passed, 1 failed, 1 skipped")
message(STATUS "check.h: pass -> 0, some skipped -> 77, any failure -> 1")
