// cuda_runtime_devices(): the GPUs the busy-kernel executor can use. Kept
// apart from torch_model.cc so that libtorch's view of CUDA (which Debian's
// CPU-only libtorch reports as none) and the CUDA runtime's are not confused.
#include "symphony/server/device.hpp"
#include "symphony/server/host_pinning.hpp"

#ifdef SYMPHONY_HAVE_CUDA_KERNEL
#include "symphony/gpu/cuda_check.hpp"
#endif

namespace symphony::server {

CudaRuntimeDevices cuda_runtime_devices() {
#ifdef SYMPHONY_HAVE_CUDA_KERNEL
  const gpu::DeviceCount dc = gpu::cuda_device_count();
  return CudaRuntimeDevices{dc.count, dc.error};
#else
  return CudaRuntimeDevices{};
#endif
}

#ifdef SYMPHONY_HAVE_CUDA_KERNEL
bool can_pin_host_memory() noexcept { return true; }

std::string pin_host_memory(void* p, std::size_t n) {
  const cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterDefault);
  if (e == cudaSuccess) return {};
  (void)cudaGetLastError();  // not sticky: clear it for the next call
  return "cudaHostRegister: " + gpu::cuda_error_text(e);
}

void unpin_host_memory(void* p) noexcept { (void)cudaHostUnregister(p); }
#else
bool can_pin_host_memory() noexcept { return false; }

std::string pin_host_memory(void*, std::size_t) {
  return "this build has no CUDA runtime (configure with the CUDA toolkit to pin host memory)";
}

void unpin_host_memory(void*) noexcept {}
#endif

}  // namespace symphony::server
