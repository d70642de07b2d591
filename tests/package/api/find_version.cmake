# SPDX-License-Identifier: Apache-2.0
# cmake -Dgpuplug_DIR=<dir> -DVERSION=<installed> -DWORK=<dir> -P find_version.cmake
# While the major version is 0 a minor version may break the API (semver's rule for 0.y.z), so
# the package accepts a request only for its own major.minor: with 0.1.0 installed,
# find_package(gpuplug 0.1) and (gpuplug 0.1.0) succeed; (gpuplug 0.0.5), (gpuplug 0.2) and
# (gpuplug 1.0) fail. From 1.0 on, any older request of the same major is accepted.
# Each request configures find_version/ in a folder of its own.
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)\\.([0-9]+)" _m "${VERSION}")
set(major ${CMAKE_MATCH_1})
set(minor ${CMAKE_MATCH_2})
set(patch ${CMAKE_MATCH_3})
math(EXPR older_minor "${minor} - 1")
math(EXPR newer_minor "${minor} + 1")
math(EXPR newer_major "${major} + 1")
set(accept "${major}.${minor}" "${major}.${minor}.0" "${major}.${minor}.${patch}")
set(refuse "${major}.${newer_minor}" "${newer_major}.0")
if(older_minor GREATER_EQUAL 0)
  if(major EQUAL 0)
    list(APPEND refuse "${major}.${older_minor}.5")  # 0.0.5 for 0.1.0: 0.x minors break
  else()
    list(APPEND accept "${major}.${older_minor}.5")
  endif()
endif()

list(REMOVE_DUPLICATES accept)

set(failures 0)
function(try_request request expect)
  string(MAKE_C_IDENTIFIER "${request}" dir)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR}/find_version -B ${WORK}/${dir}
            -Dgpuplug_DIR=${gpuplug_DIR} -DGPUPLUG_REQUEST=${request}
            -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  # A refusal counts only when it is the version's: any other configure error is a failure.
  if(rc EQUAL 0)
    set(got accepted)
  elseif(err MATCHES "compatible with requested version")
    set(got refused)
  else()
    set(got "failed for another reason")
  endif()
  if(got STREQUAL expect)
    message(STATUS "ok: find_package(gpuplug ${request}) with ${VERSION} installed: ${got}")
  else()
    message(STATUS "FAILED: find_package(gpuplug ${request}) with ${VERSION} installed: ${got}, "
                   "expected ${expect}\n${out}${err}")
    math(EXPR n "${failures} + 1")
    set(failures ${n} PARENT_SCOPE)
  endif()
endfunction()
foreach(r IN LISTS accept)
  try_request(${r} accepted)
endforeach()
foreach(r IN LISTS refuse)
  try_request(${r} refused)
endforeach()
if(failures GREATER 0)
  message(FATAL_ERROR "${failures} find_package version request(s) answered wrongly")
endif()
