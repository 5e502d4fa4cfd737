// cuda_runtime_devices(): the GPUs the busy-kernel executor can use. Kept
// apart from torch_model.cc so that libtorch's view of CUDA (which Debian's
// CPU-only libtorch reports as none) and the CUDA runtime's are not confused.
#include "symphony/server/device.hpp"

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

}  // namespace symphony::server
