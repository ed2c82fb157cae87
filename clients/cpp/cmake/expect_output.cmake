# Run PROGRAM with ARGS (separated by |) and pass only if it exits with EXPECT_STATUS and prints EXPECT_OUTPUT (and
# EXPECT_ALSO, when given): a test that a check fails for the right reason, not merely that something failed, or
# that a run which passes took the path it should.
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND "${PROGRAM}" ${args} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT status STREQUAL "${EXPECT_STATUS}")
  message(FATAL_ERROR "exit status ${status}, expected ${EXPECT_STATUS}")
endif()
foreach(expected IN ITEMS "${EXPECT_OUTPUT}" "${EXPECT_ALSO}")
  if(expected STREQUAL "")
    continue()
  endif()
  string(FIND "${out}${err}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the output lacks '${expected}'")
  endif()
endforeach()
