// The system shared memory extension (Triton's): a client puts a tensor's
// bytes in a POSIX shared memory object, registers a region of it under a
// name, and names the region in an input's or a requested output's
// parameters instead of sending the bytes (docs/front.md#system-shared-memory).
//
// SharedMemoryRegistry holds one server's regions: each is opened
// (shm_open) and mapped read-write once, at registration, and stays mapped
// while anything uses it. Unregistering removes the name at once; a request
// already holding a View of the region keeps the mapping alive until it
// ends, so it finishes reading or writing where it started.
//
// Guarantees:
//  - thread-safe: the transports call it from their I/O threads, replies
//    write outputs from the service's threads;
//  - every error is a Reply naming the region (and the tensor, for a View):
//    400 / INVALID_ARGUMENT, or 404 / NOT_FOUND for a region not registered;
//  - the bytes of a region are the client's: the server reads and writes
//    them in place, and a client that shrinks the object under a
//    registered region is outside the contract (as in Triton).
//
//   SharedMemoryRegistry shm;
//   if (auto err = shm.register_region("in", "/my_input", 0, 64)) return *err;
//   SharedMemoryRegistry::View v;
//   if (auto err = shm.view({"in", 0, 16}, "input 'x'", &v)) return *err;
//   std::memcpy(dst, v.data(), v.size());
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/front/protocol.hpp"

namespace symphony::front {

// The answer to a CUDA shared memory registration (501 / UNIMPLEMENTED):
// the CUDA extension (cudaIpc handles) is not served yet.
inline constexpr std::string_view kNoCudaSharedMemory =
    "CUDA shared memory is not supported on this server (CUDA IPC regions are not implemented); "
    "register system shared memory instead (v2/systemsharedmemory)";

// Why a server refuses the extension while clients are not allowed it
// (Front::allow_shared_memory).
inline constexpr std::string_view kSharedMemoryOff =
    "this server takes no shared memory from its clients (start it with --allow-client-shm to allow it)";

// Reads the extension's parameters of tensor `who` ("input 'x'"):
// `shared_memory_region` (a string) and `shared_memory_byte_size` (an
// integer) together, `shared_memory_offset` (an integer, default 0)
// optional. *out stays empty when none is given; a reply with 400 when they
// are incomplete or of the wrong type.
std::optional<Reply> shared_memory_parameters(const std::map<std::string, Parameter>& params,
                                              std::string_view who, std::optional<SharedMemoryRef>* out);

class SharedMemoryRegistry {
 public:
  // The most regions registered at once (each holds a mapping).
  static constexpr std::size_t kMaxRegions = 4096;

  // A registered region, as the status call lists it.
  struct RegionStatus {
    std::string name;
    std::string key;           // the shared memory object's name, as given to shm_open
    std::uint64_t offset = 0;  // of the region within the object
    std::uint64_t byte_size = 0;
  };

  // Bytes of a region, mapped as long as the view (or a copy of it) lives.
  class View {
   public:
    char* data() const noexcept { return data_; }
    std::uint64_t size() const noexcept { return size_; }
    bool empty() const noexcept { return !mapping_; }
    // What keeps the bytes mapped (for a tensor that reads them in place).
    const std::shared_ptr<const void>& keep() const noexcept { return mapping_; }

   private:
    friend class SharedMemoryRegistry;
    std::shared_ptr<const void> mapping_;
    char* data_ = nullptr;
    std::uint64_t size_ = 0;
  };

  SharedMemoryRegistry() = default;
  ~SharedMemoryRegistry();
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  // Opens shared memory object `key` and maps [offset, offset + byte_size)
  // of it as region `name`. An error names the region: a name already
  // registered, a key shm_open cannot open (with the system's reason), a
  // range beyond the object's end, byte_size 0.
  std::optional<Reply> register_region(const std::string& name, const std::string& key, std::uint64_t offset,
                                       std::uint64_t byte_size);
  // Unregisters region `name`, or every region when `name` is empty. A
  // name not registered is no error (as in Triton). Requests holding a
  // View of a region keep its mapping until they end.
  void unregister(std::string_view name);
  // Region `name`, or every region when empty (by name); 404 for a name not
  // registered.
  std::optional<Reply> status(std::string_view name, std::vector<RegionStatus>* out) const;
  // The bytes `ref` names, for tensor `who` ("input 'x' of model 'm'"):
  // 404 when the region is not registered, 400 when the range is beyond it.
  std::optional<Reply> view(const SharedMemoryRef& ref, std::string_view who, View* out) const;
  // Regions registered now.
  std::size_t size() const;

 private:
  struct Region;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Region>, std::less<>> regions_;
};

}  // namespace symphony::front
