# SPDX-License-Identifier: Apache-2.0
# Test driver: runs a command and checks its exit status and output (CTest's
# PASS_REGULAR_EXPRESSION alone would ignore the exit status).
#   cmake -DEXPECT_EXIT=<n> [-DEXPECT_OUTPUT1=<regex> ... -DEXPECT_OUTPUT4=<regex>]
#         [-DREJECT_OUTPUT=<regex>] -P run_check.cmake -- <command> [<arg>...]
# Each EXPECT regex must match somewhere in stdout + stderr; REJECT must match nowhere (e.g. a
# line that may appear only once, written twice).
set(cmd "")
set(seen_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(seen_separator)
    list(APPEND cmd "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(seen_separator TRUE)
  endif()
endforeach()
if(NOT cmd OR NOT DEFINED EXPECT_EXIT)
  message(FATAL_ERROR
    "usage: cmake -DEXPECT_EXIT=<n> [-DEXPECT_OUTPUT1=<regex>] -P run_check.cmake -- <command> ...")
endif()

execute_process(COMMAND ${cmd} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("---- stdout\n${out}---- stderr\n${err}---- exit status ${status}")
set(failures "")
if(NOT status STREQUAL "${EXPECT_EXIT}")
  string(APPEND failures "exit status ${status}, expected ${EXPECT_EXIT}\n")
endif()
foreach(var IN ITEMS EXPECT_OUTPUT1 EXPECT_OUTPUT2 EXPECT_OUTPUT3 EXPECT_OUTPUT4)
  if(DEFINED ${var} AND NOT "${out}${err}" MATCHES "${${var}}")
    string(APPEND failures "output does not match '${${var}}'\n")
  endif()
endforeach()
if(DEFINED REJECT_OUTPUT AND "${out}${err}" MATCHES "${REJECT_OUTPUT}")
  string(APPEND failures "output matches '${REJECT_OUTPUT}', which it must not\n")
endif()
if(failures)
  message(FATAL_ERROR "${failures}")
endif()
