# SPDX-License-Identifier: Apache-2.0
# Test driver for an MPI job: runs it under a time limit and checks its exit status and output.
#   cmake -DEXPECT_EXIT=<n> -DTIME_LIMIT=<seconds> [-DEXPECT_OUTPUT1=<regex> ...
#         -DEXPECT_OUTPUT4=<regex>] [-DREJECT_OUTPUT=<regex>] -P mpi_check.cmake -- <command> ...
# mpirun exits with the status of the first rank that failed (MPI_Abort's error code for an
# aborted job). A job still running at TIME_LIMIT fails the test as a hang.
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
if(NOT cmd OR NOT DEFINED EXPECT_EXIT OR NOT DEFINED TIME_LIMIT)
  message(FATAL_ERROR
    "usage: cmake -DEXPECT_EXIT=<n> -DTIME_LIMIT=<s> -P mpi_check.cmake -- <command> ...")
endif()

string(TIMESTAMP start "%s")
execute_process(COMMAND ${cmd} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err
  TIMEOUT ${TIME_LIMIT})
string(TIMESTAMP end "%s")
math(EXPR took "${end} - ${start}")
message("---- stdout\n${out}---- stderr\n${err}---- exit status ${status} after ${took} s")
set(failures "")
if(NOT status MATCHES "^[0-9]+$")
  string(APPEND failures "the job did not end by itself within ${TIME_LIMIT} s: ${status}\n")
elseif(NOT status EQUAL EXPECT_EXIT)
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
