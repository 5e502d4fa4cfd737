// The CUDA runtime's calls behind the protocol's CUDA shared memory regions
// (front::CudaIpc; docs/front.md#cuda-shared-memory): a client's
// cudaIpcMemHandle_t opened on a device, and copies between it and the host.
// Built with the CUDA runtime (cuda_runtime_devices.cc); elsewhere
// can_open_cuda_ipc() is false and every call fails saying so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace symphony::server {

bool can_open_cuda_ipc() noexcept;
// Each returns an error's text (the CUDA runtime's name for it), empty on success.
std::string cuda_ipc_open(const std::string& handle, std::int64_t device, void** ptr);
void cuda_ipc_close(void* ptr, std::int64_t device) noexcept;
std::string cuda_ipc_to_host(void* host, const void* device_ptr, std::size_t n, std::int64_t device);
std::string cuda_ipc_to_device(void* device_ptr, const void* host, std::size_t n, std::int64_t device);

}  // namespace symphony::server
