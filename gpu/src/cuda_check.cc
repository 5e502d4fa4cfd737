// See cuda_check.hpp.
#include "symphony/gpu/cuda_check.hpp"

#include <stdexcept>

namespace symphony::gpu {

std::string cuda_error_text(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                           cuda_error_text(err));
}

DeviceCount cuda_device_count() {
  DeviceCount out;
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    // The error is not sticky, but clear it so that no later
    // cudaGetLastError() reports it.
    (void)cudaGetLastError();
    out.error = "cudaGetDeviceCount: " + cuda_error_text(err);
    return out;
  }
  if (n <= 0) {
    out.error = "cudaGetDeviceCount: no CUDA device";
    return out;
  }
  out.count = n;
  return out;
}

}  // namespace symphony::gpu
