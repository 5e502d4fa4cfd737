// Devices the server runs batches on, and how users name them.
//
//   "auto"          every CUDA GPU, else the CPU
//   "cpu" "cpu:2"   one (or two) CPU devices: worker threads running libtorch
//   "cuda" "cuda:0,cuda:1"  all, or the listed, CUDA GPUs
//   "emulated:8"    eight emulated GPUs that run each batch for exactly l(b)
//   "cuda-emulated" "cuda-emulated:0,cuda-emulated:1"  all, or the listed, CUDA
//                   GPUs running each batch as a busy kernel of l(b) (no model;
//                   gpu::CudaKernelExecutor, built with the CUDA toolkit)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "symphony/status.hpp"

namespace symphony::server {

enum class DeviceKind { kCpu, kCuda, kEmulated, kCudaEmulated };

// Whether a device runs the models (CPU, CUDA) or only the profile's l(b)
// (emulated, CUDA-emulated).
constexpr bool runs_model(DeviceKind k) noexcept { return k == DeviceKind::kCpu || k == DeviceKind::kCuda; }

struct DeviceSpec {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // CUDA ordinal, or the CPU/emulated device's number

  std::string to_string() const {
    switch (kind) {
      case DeviceKind::kCpu:
        return "cpu:" + std::to_string(index);
      case DeviceKind::kCuda:
        return "cuda:" + std::to_string(index);
      case DeviceKind::kEmulated:
        return "emulated:" + std::to_string(index);
      case DeviceKind::kCudaEmulated:
        return "cuda-emulated:" + std::to_string(index);
    }
    return "?";
  }
  bool operator==(const DeviceSpec&) const = default;
};

// The CUDA GPUs the busy-kernel executor can use: the CUDA runtime's count,
// or -1 when this build has no busy-kernel executor; `error` says why the
// count is 0.
struct CudaRuntimeDevices {
  int count = -1;
  std::string error;
};
CudaRuntimeDevices cuda_runtime_devices();

// Parses a device list. `cuda_count` is how many CUDA GPUs libtorch can use
// (0 without one); "auto" and "cuda" expand with it. "cuda-emulated" expands
// with `runtime`.
Result<std::vector<DeviceSpec>> parse_devices(std::string_view text, int cuda_count,
                                              const CudaRuntimeDevices& runtime = {});

// Parses a list of device names as the server names its devices
// (DeviceSpec::to_string, Server::devices(): "cpu:1, cuda:0"), to say which
// of a server's devices serve a model (ModelOptions::devices). Unlike in
// parse_devices, "cpu:2" is the CPU device numbered 2, not two CPU devices.
// Whether the server has them is the server's to check.
Result<std::vector<DeviceSpec>> parse_device_names(std::string_view text);

// "cpu:0, cuda:1": devices as parse_device_names reads them (logs, errors).
std::string device_names(const std::vector<DeviceSpec>& devices);

// The number of CUDA devices usable from libtorch (0 when libtorch was built
// without CUDA or no device exists).
int cuda_device_count();

}  // namespace symphony::server
