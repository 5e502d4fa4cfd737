// Checking CUDA runtime calls, and asking the CUDA runtime for its devices.
//
// Every CUDA call in the CUDA executors goes through SYMPHONY_CUDA_CHECK,
// which throws std::runtime_error with the call, file:line and the CUDA error's
// name and text; the executors turn that into a failed batch or a failed
// start-up with a message a user can act on.
//
//   SYMPHONY_CUDA_CHECK(cudaEventRecord(e, stream));
//   // -> "cudaEventRecord(e, stream) failed at gpu/src/x.cc:42: cudaErrorInvalidResourceHandle (invalid
//   ...)"
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace symphony::gpu {

// "cudaErrorNoDevice (no CUDA-capable device is detected)".
std::string cuda_error_text(cudaError_t err);

// Throws std::runtime_error: "<call> failed at <file>:<line>: <name> (<text>)".
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);

#define SYMPHONY_CUDA_CHECK(call)                                                       \
  do {                                                                                  \
    const cudaError_t symphony_cuda_err_ = (call);                                      \
    if (symphony_cuda_err_ != cudaSuccess)                                              \
      ::symphony::gpu::throw_cuda_error(symphony_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

// How many CUDA devices the CUDA runtime sees. Without a usable device (no
// driver, no GPU) `count` is 0 and `error` says why, e.g. "cudaGetDeviceCount:
// cudaErrorInsufficientDriver (CUDA driver version is insufficient ...)";
// `error` is empty exactly when count > 0.
struct DeviceCount {
  int count = 0;
  std::string error;
};
DeviceCount cuda_device_count();

}  // namespace symphony::gpu
