// The busy kernel of CudaKernelExecutor (kernel_executor.hpp): one thread
// that spins on the SM's cycle counter. Compiled by nvcc; everything else of
// the executor is plain C++ against the CUDA runtime.
#include <cuda_runtime.h>

namespace symphony::gpu {
namespace {

__global__ void busy_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

cudaError_t launch_busy_kernel(cudaStream_t stream, long long cycles) {
  busy_kernel<<<1, 1, 0, stream>>>(cycles < 0 ? 0 : cycles);
  return cudaGetLastError();
}

}  // namespace symphony::gpu
