# SPDX-License-Identifier: Apache-2.0
# Resolves GPUPLUG_WITH_CUDA / _HIP / _VULKAN (AUTO/ON/OFF) into GPUPLUG_BUILD_CUDA / _HIP / _VULKAN,
# saying in the configure log why a vendor is skipped.
include_guard(GLOBAL)

# The GPU vendors gpuplug ships, once for the whole build: each has plugins/<vendor>,
# kernels/<vendor>, an option GPUPLUG_WITH_<VENDOR> and a result GPUPLUG_BUILD_<VENDOR> (below).
set(GPUPLUG_VENDORS cuda hip vulkan)

function(_gpuplug_vendor var label found why)
  string(TOUPPER "${${var}}" mode)
  if(mode STREQUAL "OFF")
    message(STATUS "gpuplug: ${label} plugin: OFF (${var}=OFF)")
    set(result OFF)
  elseif(found)
    message(STATUS "gpuplug: ${label} plugin: ON")
    set(result ON)
  elseif(mode STREQUAL "ON")
    message(FATAL_ERROR "gpuplug: ${var}=ON but ${why}")
  else()
    message(STATUS "gpuplug: ${label} plugin: skipped (${why})")
    set(result OFF)
  endif()
  string(REPLACE "WITH" "BUILD" out ${var})
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# CUDA: the toolkit's headers (for cuda.h) and nvcc (for the kernels). The driver is dlopen'ed.
find_program(GPUPLUG_NVCC nvcc HINTS ENV CUDA_PATH PATHS /usr/local/cuda/bin)
find_path(GPUPLUG_CUDA_INCLUDE_DIR cuda.h HINTS ENV CUDA_PATH PATH_SUFFIXES include PATHS /usr/local/cuda/include)
if(GPUPLUG_NVCC AND GPUPLUG_CUDA_INCLUDE_DIR)
  set(_cuda_found TRUE)
else()
  set(_cuda_found FALSE)
endif()
_gpuplug_vendor(GPUPLUG_WITH_CUDA "CUDA" ${_cuda_found} "nvcc or cuda.h not found (set CUDA_PATH)")

# HIP: the headers (hip/hip_runtime_api.h) and hipcc (for the kernels). The runtime is dlopen'ed.
find_program(GPUPLUG_HIPCC hipcc HINTS ENV ROCM_PATH PATHS /opt/rocm/bin)
find_path(GPUPLUG_HIP_INCLUDE_DIR hip/hip_runtime_api.h HINTS ENV ROCM_PATH PATH_SUFFIXES include PATHS /opt/rocm/include)
if(GPUPLUG_HIPCC AND GPUPLUG_HIP_INCLUDE_DIR)
  set(_hip_found TRUE)
else()
  set(_hip_found FALSE)
endif()
_gpuplug_vendor(GPUPLUG_WITH_HIP "HIP" ${_hip_found} "hipcc or hip/hip_runtime_api.h not found (set ROCM_PATH)")

# Vulkan: vulkan/vulkan.h (libvulkan-dev) and glslc (for the kernels). The loader, libvulkan.so.1,
# is dlopen'ed.
find_path(GPUPLUG_VULKAN_INCLUDE_DIR vulkan/vulkan.h HINTS ENV VULKAN_SDK PATH_SUFFIXES include)
find_program(GPUPLUG_GLSLC glslc HINTS ENV VULKAN_SDK PATH_SUFFIXES bin)
if(GPUPLUG_VULKAN_INCLUDE_DIR AND GPUPLUG_GLSLC)
  set(_vulkan_found TRUE)
else()
  set(_vulkan_found FALSE)
endif()
_gpuplug_vendor(GPUPLUG_WITH_VULKAN "Vulkan" ${_vulkan_found} "vulkan/vulkan.h or glslc not found (install libvulkan-dev and glslc, or set VULKAN_SDK)")
