# SPDX-License-Identifier: Apache-2.0
# gpuplug_add_kernel_module(<module> SOURCES <src>... [OUTPUT_DIR <dir>] [INSTALL_DIR <dir>]
#                           [LINK <target>...]): builds a host kernel module, <module>.so (no lib
# prefix: the host plugin looks a module up as <folder>/<module>.so), as a MODULE library whose
# kernels are exported with GPUPLUG_HOST_KERNEL and their sizes with GPUPLUG_HOST_KERNEL_ARGS from
# <gpuplug/host_kernel.hpp>. It needs the gpuplug headers only, never libgpuplug.
#   OUTPUT_DIR   where the .so is built; default ${CMAKE_CURRENT_BINARY_DIR}/modules/host, so that
#                the create option modules_dir=<that folder> finds it on the host backend, and
#                `gpuplug check --modules ${CMAKE_CURRENT_BINARY_DIR}/modules` too.
#   INSTALL_DIR  where `cmake --install` puts it; not installed without one.
#   LINK         further targets (another library the module links).
# The target is gpuplug-kernel-host-<module>. Hidden visibility, no GNU unique symbols (so that
# unloading the module really unmaps it), -O3 outside Debug, no RUNPATH, no undefined symbols
# (unless GPUPLUG_SANITIZER is set: the sanitizer runtime comes from the host process).
# CUDA and HIP modules are files the vendor compiler writes (docs/kernels.md, "Your own modules").
#
# Used by gpuplug's own build (kernels/host) and, installed with the CMake package, by
# applications (find_package(gpuplug CONFIG) includes this file).
include_guard(GLOBAL)

function(gpuplug_add_kernel_module module)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "OUTPUT_DIR;INSTALL_DIR" "SOURCES;LINK")
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "gpuplug_add_kernel_module(${module}): SOURCES is required")
  endif()
  if(NOT module MATCHES "^[A-Za-z0-9_]+$")
    message(FATAL_ERROR "gpuplug_add_kernel_module(${module}): the name must be [A-Za-z0-9_]+ "
                        "(it is the module name OpCache::kernel and load_module take)")
  endif()
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/modules/host)
  endif()
  set(target gpuplug-kernel-host-${module})
  add_library(${target} MODULE ${ARG_SOURCES})
  # The headers only: gpuplug::core's include folders, not its library.
  target_include_directories(${target} PRIVATE
    $<TARGET_PROPERTY:gpuplug::core,INTERFACE_INCLUDE_DIRECTORIES>)
  target_link_libraries(${target} PRIVATE ${ARG_LINK})
  target_compile_features(${target} PRIVATE cxx_std_20)
  target_compile_options(${target} PRIVATE
    $<$<CXX_COMPILER_ID:GNU>:-fno-gnu-unique>
    $<$<NOT:$<CONFIG:Debug>>:-O3>)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${module}
    PREFIX ""
    SUFFIX ".so"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR}
    # No RUNPATH at all: a kernel module needs nothing from the build tree.
    SKIP_BUILD_RPATH ON
    INSTALL_RPATH "")
  if(NOT GPUPLUG_SANITIZER)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  if(ARG_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${ARG_INSTALL_DIR})
  endif()
endfunction()
