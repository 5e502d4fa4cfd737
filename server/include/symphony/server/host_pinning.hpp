// Pinning host memory for the GPU's copies (page-locked: cudaHostRegister),
// for the host memory pool of `symphony serve` (front/host_memory_pool.hpp).
// The CUDA runtime is called only in CUDA builds (cuda_runtime_devices.cc);
// elsewhere pinning fails with a message saying so.
#pragma once

#include <cstddef>
#include <string>

namespace symphony::server {

// Whether this build can pin host memory (it has the CUDA runtime).
bool can_pin_host_memory() noexcept;
// Pins [p, p + n); returns an error's text (the runtime's name for it),
// empty on success.
std::string pin_host_memory(void* p, std::size_t n);
// Undoes pin_host_memory(p, ...).
void unpin_host_memory(void* p) noexcept;

}  // namespace symphony::server
