# symphony_cuda_compile_check: the libtorch CUDA executor, its CUDA graphs
# and the server built with SYMPHONY_HAVE_CUDA, compiled to objects (never linked) against
# the libtorch headers found and the CUDA toolkit's headers. Debian's CPU-only
# libtorch ships the c10/cuda and ATen/cuda headers but not the libraries, and
# lacks the generated c10/cuda/impl/cuda_cmake_macros.h: a stub of it is
# written into the build tree. The CTest test cuda_compile_check (label
# build, tests/CMakeLists.txt) builds the target, so a syntax or API error in
# code that CI can neither link nor run fails CI. Included from
# server/CMakeLists.txt; the reason for a skip goes to the global property
# SYMPHONY_CUDA_CHECK_SKIP.
if(NOT TARGET symphony::gpu)
  if(SYMPHONY_WITH_CUDA STREQUAL "OFF")
    set(_skip "SYMPHONY_WITH_CUDA=OFF")
  else()
    string(CONCAT _skip "no CUDA toolkit (nvcc and cudart) was found at configure time (looked on PATH, in "
      "$CUDACXX and /usr/local/cuda/bin); install CUDA at /usr/local/cuda and reconfigure to compile-check the "
      "CUDA executors")
  endif()
  set_property(GLOBAL PROPERTY SYMPHONY_CUDA_CHECK_SKIP "${_skip}")
  return()
endif()

find_path(SYMPHONY_C10_CUDA_INCLUDE c10/cuda/CUDAStream.h PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
if(NOT SYMPHONY_C10_CUDA_INCLUDE)
  set_property(GLOBAL PROPERTY SYMPHONY_CUDA_CHECK_SKIP
    "the libtorch headers found (${TORCH_INCLUDE_DIRS}) have no c10/cuda/CUDAStream.h")
  return()
endif()

add_library(symphony_cuda_compile_check OBJECT EXCLUDE_FROM_ALL src/cuda_executor.cc src/cuda_graphs.cc src/server.cc)
if(NOT EXISTS ${SYMPHONY_C10_CUDA_INCLUDE}/c10/cuda/impl/cuda_cmake_macros.h)
  set(_stub ${CMAKE_CURRENT_BINARY_DIR}/cuda_compile_check/include)
  file(WRITE ${_stub}/c10/cuda/impl/cuda_cmake_macros.h
    "// Written by cmake/SymphonyCudaCompileCheck.cmake: libtorch generates this header when it is built\n"
    "// with CUDA; these headers come from a libtorch built without. It defines nothing that the code\n"
    "// compiled here needs (a shared-library build is the default).\n"
    "#pragma once\n")
  target_include_directories(symphony_cuda_compile_check SYSTEM PRIVATE ${_stub})
endif()
target_include_directories(symphony_cuda_compile_check PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(symphony_cuda_compile_check PRIVATE symphony::core symphony::runtime symphony::profile_io
                                                          symphony::gpu ${TORCH_LIBRARIES} symphony_internal)
target_compile_definitions(symphony_cuda_compile_check PRIVATE SYMPHONY_HAVE_CUDA=1)
# As symphony_server: libtorch's headers do not survive the strictest warnings.
# -O0 last: a syntax or API error shows as well, in half the time.
target_compile_options(symphony_cuda_compile_check PRIVATE -Wno-conversion -Wno-shadow -Wno-old-style-cast
  -Wno-pedantic -Wno-restrict -O0)
set_property(GLOBAL PROPERTY SYMPHONY_CUDA_CHECK_SKIP "")
