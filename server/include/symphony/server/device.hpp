// Devices the server runs batches on, and how users name them.
//
//   "auto"          every CUDA GPU, else the CPU
//   "cpu" "cpu:2"   one (or two) CPU devices: worker threads running libtorch
//   "cuda" "cuda:0,cuda:1"  all, or the listed, CUDA GPUs
//   "emulated:8"    eight emulated GPUs that run each batch for exactly l(b)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "symphony/status.hpp"

namespace symphony::server {

enum class DeviceKind { kCpu, kCuda, kEmulated };

struct DeviceSpec {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // CUDA ordinal, or the CPU/emulated device's number

  std::string to_string() const {
    switch (kind) {
      case DeviceKind::kCpu: return "cpu:" + std::to_string(index);
      case DeviceKind::kCuda: return "cuda:" + std::to_string(index);
      case DeviceKind::kEmulated: return "emulated:" + std::to_string(index);
    }
    return "?";
  }
  bool operator==(const DeviceSpec&) const = default;
};

// Parses a device list. `cuda_count` is how many CUDA GPUs exist (from the
// CUDA runtime; 0 without one); "auto" and "cuda" expand with it.
Result<std::vector<DeviceSpec>> parse_devices(std::string_view text, int cuda_count);

// The number of CUDA devices usable from libtorch (0 when libtorch was built
// without CUDA or no device exists).
int cuda_device_count();

}  // namespace symphony::server
