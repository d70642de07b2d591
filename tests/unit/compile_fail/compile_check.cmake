# SPDX-License-Identifier: Apache-2.0
# cmake -DCXX=<compiler> -DINCLUDE=<include dir> -DSOURCE=<file> -DDEFINE=<macro> -P compile_check.cmake
# SOURCE must compile without DEFINE and must fail to compile with it, the error naming `deleted`.
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE} ${SOURCE}
                RESULT_VARIABLE plain_rc ERROR_VARIABLE plain_err)
if(NOT plain_rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} does not compile as it should:\n${plain_err}")
endif()
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE} -D${DEFINE} ${SOURCE}
                RESULT_VARIABLE bad_rc ERROR_VARIABLE bad_err)
if(bad_rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} with ${DEFINE} compiles, but that spelling must not")
endif()
if(NOT bad_err MATCHES "deleted")
  message(FATAL_ERROR "${SOURCE} with ${DEFINE} fails for another reason:\n${bad_err}")
endif()
message(STATUS "${DEFINE}: refused at compile time, as it should be")
