# The CUDA toolkit (nvcc and cudart), for the CUDA executors.
#
# SYMPHONY_WITH_CUDA: OFF builds no CUDA code; AUTO builds the busy-kernel
# executor (gpu/, nvcc + cudart, no libtorch) whenever the toolkit is found,
# and the libtorch CUDA executor when the libtorch found has CUDA too; ON
# requires both. Sets SYMPHONY_HAVE_CUDA_TOOLKIT. Looks for nvcc on PATH, in
# $CUDACXX and in /usr/local/cuda/bin.
set(SYMPHONY_HAVE_CUDA_TOOLKIT OFF)
if(NOT SYMPHONY_WITH_CUDA STREQUAL "OFF" AND NOT SYMPHONY_CORE_TESTS_ONLY)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Turing (the oldest nvcc 13 targets) as machine code, Hopper as machine
    # code and PTX; override with -DCMAKE_CUDA_ARCHITECTURES=...
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 75-real 90)
    endif()
    # One CUDA runtime per process: libtorch links the shared one.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    # CMake 3.25's FindCUDAToolkit sets a property on CUDA::nvToolsExt, which
    # CUDA 12.9+ no longer ships, whenever the project requires CMake >= 3.25
    # (fixed in later CMake): look the toolkit up as a 3.24 project would.
    set(_symphony_min_version ${CMAKE_MINIMUM_REQUIRED_VERSION})
    if(CMAKE_VERSION VERSION_LESS 3.26)
      set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
    endif()
    find_package(CUDAToolkit)
    set(CMAKE_MINIMUM_REQUIRED_VERSION ${_symphony_min_version})
    if(CUDAToolkit_FOUND AND TARGET CUDA::cudart)
      set(SYMPHONY_HAVE_CUDA_TOOLKIT ON)
      if(SYMPHONY_CCACHE_PROGRAM)
        set(CMAKE_CUDA_COMPILER_LAUNCHER "${SYMPHONY_CCACHE_PROGRAM}")
      endif()
    endif()
  endif()
  if(SYMPHONY_HAVE_CUDA_TOOLKIT)
    message(STATUS "symphony: CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER}); the busy-kernel executor is built")
  elseif(SYMPHONY_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SYMPHONY_WITH_CUDA=ON but no CUDA toolkit (nvcc and cudart) was found: put nvcc on PATH, "
      "set CUDACXX, or install CUDA at /usr/local/cuda")
  else()
    message(STATUS "symphony: no CUDA toolkit (nvcc and cudart) found; no CUDA executor is built")
  endif()
endif()
