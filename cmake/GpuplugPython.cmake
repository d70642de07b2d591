# SPDX-License-Identifier: Apache-2.0
# Resolves GPUPLUG_WITH_PYTHON (AUTO/ON/OFF) into GPUPLUG_BUILD_PYTHON: the Python module gpuplug
# (python/) needs a Python with its development headers (Interpreter, Development.Module), the
# pybind11 CMake package and DLPack (cmake/GpuplugDlpack.cmake).
include_guard(GLOBAL)

set(GPUPLUG_WITH_PYTHON AUTO CACHE STRING "Build the Python module gpuplug (AUTO/ON/OFF)")
set_property(CACHE GPUPLUG_WITH_PYTHON PROPERTY STRINGS AUTO ON OFF)
# The Python the module is built for and its tests run with: Debian's python3 by default (where
# python3-pybind11, python3-numpy, python3-torch and python3-pytest install), not whichever
# python3 comes first on PATH (a pyenv shim has none of them).
if(EXISTS /usr/bin/python3)
  set(_gpuplug_python_default /usr/bin/python3)
else()
  set(_gpuplug_python_default "")
endif()
set(GPUPLUG_PYTHON "${_gpuplug_python_default}" CACHE FILEPATH
  "The Python the gpuplug module is built for (empty: the first python3 FindPython finds)")
unset(_gpuplug_python_default)

set(_why "")
string(TOUPPER "${GPUPLUG_WITH_PYTHON}" _mode)
if(NOT _mode STREQUAL "OFF")
  if(GPUPLUG_SANITIZER)
    # An uninstrumented python3 cannot load an extension built with the sanitizer ("ASan runtime
    # does not come first in initial library list"); the C++ it binds runs under the sanitizers
    # in the Boost.Test suites.
    set(_why "GPUPLUG_SANITIZER=${GPUPLUG_SANITIZER}: the system's uninstrumented python3 cannot load a sanitized extension")
  elseif(NOT GPUPLUG_BUILD_DLPACK)
    set(_why "DLPack is not built (GPUPLUG_WITH_DLPACK)")
  else()
    if(GPUPLUG_PYTHON)
      set(Python_EXECUTABLE "${GPUPLUG_PYTHON}")
    endif()
    # FindPython's own variables (Python_*), apart from the Python3_* other tests use.
    find_package(Python 3.8 QUIET COMPONENTS Interpreter Development.Module)
    if(NOT Python_Interpreter_FOUND)
      set(_why "no Python 3.8 or later interpreter (GPUPLUG_PYTHON=${GPUPLUG_PYTHON})")
    elseif(NOT Python_Development.Module_FOUND)
      set(_why "${Python_EXECUTABLE} has no development headers (Debian: python3-dev)")
    else()
      # pybind11's CMake package; Debian's python3-pybind11 puts it beside the Python module.
      execute_process(COMMAND ${Python_EXECUTABLE} -c "import pybind11; print(pybind11.get_cmake_dir())"
        OUTPUT_VARIABLE _pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      set(PYBIND11_FINDPYTHON ON)
      find_package(pybind11 2.6 CONFIG QUIET HINTS ${_pybind11_dir})
      if(NOT pybind11_FOUND)
        set(_why "no pybind11 CMake package (Debian: pybind11-dev python3-pybind11)")
      endif()
      unset(_pybind11_dir)
    endif()
  endif()
endif()

if(_mode STREQUAL "OFF")
  set(_why "GPUPLUG_WITH_PYTHON=OFF")
endif()
# tests/python registers a test that reports this, skipped, when the module is not built.
set(GPUPLUG_PYTHON_SKIP_REASON "${_why}")
if(_mode STREQUAL "OFF")
  message(STATUS "gpuplug: Python module: OFF (GPUPLUG_WITH_PYTHON=OFF)")
  set(GPUPLUG_BUILD_PYTHON OFF)
elseif(_why STREQUAL "")
  message(STATUS "gpuplug: Python module: ON (${Python_EXECUTABLE}, Python ${Python_VERSION}, "
    "pybind11 ${pybind11_VERSION})")
  set(GPUPLUG_BUILD_PYTHON ON)
elseif(_mode STREQUAL "ON")
  message(FATAL_ERROR "gpuplug: GPUPLUG_WITH_PYTHON=ON but ${_why}")
else()
  message(STATUS "gpuplug: Python module: skipped, with its tests (${_why})")
  set(GPUPLUG_BUILD_PYTHON OFF)
endif()
unset(_why)
unset(_mode)
