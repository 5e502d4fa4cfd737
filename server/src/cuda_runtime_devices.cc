// cuda_runtime_devices(): the GPUs the busy-kernel executor can use. Kept
// apart from torch_model.cc so that libtorch's view of CUDA (which Debian's
// CPU-only libtorch reports as none) and the CUDA runtime's are not confused.
#include "symphony/server/cuda_ipc.hpp"
#include "symphony/server/device.hpp"
#include "symphony/server/host_pinning.hpp"

#ifdef SYMPHONY_HAVE_CUDA_KERNEL
#include <cuda_runtime_api.h>

#include <cstring>

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

#ifdef SYMPHONY_HAVE_CUDA_KERNEL
namespace {

// Runs f on `device`, restoring the thread's device; the runtime's error as text.
template <class F>
std::string on_device(std::int64_t device, F f) {
  int was = 0;
  (void)cudaGetDevice(&was);
  cudaError_t e = cudaSetDevice(static_cast<int>(device));
  if (e == cudaSuccess) e = f();
  (void)cudaSetDevice(was);
  if (e == cudaSuccess) return {};
  (void)cudaGetLastError();  // not sticky: clear it for the next call
  return gpu::cuda_error_text(e);
}

}  // namespace

bool can_open_cuda_ipc() noexcept { return true; }

std::string cuda_ipc_open(const std::string& handle, std::int64_t device, void** ptr) {
  cudaIpcMemHandle_t h;
  if (handle.size() != sizeof h)
    return "a cudaIpcMemHandle_t is " + std::to_string(sizeof h) + " bytes, not " +
           std::to_string(handle.size());
  std::memcpy(&h, handle.data(), sizeof h);
  return on_device(device, [&] { return cudaIpcOpenMemHandle(ptr, h, cudaIpcMemLazyEnablePeerAccess); });
}

void cuda_ipc_close(void* ptr, std::int64_t device) noexcept {
  (void)on_device(device, [&] { return cudaIpcCloseMemHandle(ptr); });
}

std::string cuda_ipc_to_host(void* host, const void* device_ptr, std::size_t n, std::int64_t device) {
  return on_device(device, [&] { return cudaMemcpy(host, device_ptr, n, cudaMemcpyDeviceToHost); });
}

std::string cuda_ipc_to_device(void* device_ptr, const void* host, std::size_t n, std::int64_t device) {
  return on_device(device, [&] { return cudaMemcpy(device_ptr, host, n, cudaMemcpyHostToDevice); });
}
#else
bool can_open_cuda_ipc() noexcept { return false; }

namespace {
const char* const kNoCudaRuntime = "this build has no CUDA runtime (configure with the CUDA toolkit)";
}  // namespace

std::string cuda_ipc_open(const std::string&, std::int64_t, void**) { return kNoCudaRuntime; }
void cuda_ipc_close(void*, std::int64_t) noexcept {}
std::string cuda_ipc_to_host(void*, const void*, std::size_t, std::int64_t) { return kNoCudaRuntime; }
std::string cuda_ipc_to_device(void*, const void*, std::size_t, std::int64_t) { return kNoCudaRuntime; }
#endif

}  // namespace symphony::server
