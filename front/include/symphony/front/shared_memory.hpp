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
//  - with pinning set (set_pinning: cudaHostRegister where the server has a
//    CUDA GPU), each region's mapping is pinned at registration and unpinned
//    just before it is unmapped; one that cannot be pinned is served as
//    mapped, its status saying why.
//
//   SharedMemoryRegistry shm;
//   if (auto err = shm.register_region("in", "/my_input", 0, 64)) return *err;
//   SharedMemoryRegistry::View v;
//   if (auto err = shm.view({"in", 0, 16}, "input 'x'", &v)) return *err;
//   std::memcpy(dst, v.data(), v.size());
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/front/protocol.hpp"

namespace symphony::front {

// The answer to a CUDA shared memory registration (501 / UNIMPLEMENTED)
// on a server without the CUDA calls of the extension (CudaIpc).
inline constexpr std::string_view kNoCudaSharedMemory =
    "CUDA shared memory is not supported on this server (it has no CUDA GPU, or was built without CUDA); "
    "register system shared memory instead (v2/systemsharedmemory)";

// The CUDA runtime's calls behind CUDA shared memory regions (serve: the
// CUDA runtime, cuda_runtime_devices.cc; tests: host memory). Each returns
// an error's text, empty on success. open() maps a client's
// cudaIpcMemHandle_t (its bytes) on `device` and gives the device pointer;
// close() undoes it; the copies are complete when they return.
struct CudaIpc {
  std::function<std::string(const std::string& handle, std::int64_t device, void** ptr)> open;
  std::function<void(void* ptr, std::int64_t device)> close;
  std::function<std::string(void* host, const void* device_ptr, std::size_t n, std::int64_t device)> to_host;
  std::function<std::string(void* device_ptr, const void* host, std::size_t n, std::int64_t device)>
      to_device;
  explicit operator bool() const noexcept { return open && close && to_host && to_device; }
};

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
    std::int64_t device_id = -1;  // a CUDA region's device; -1: system shared memory
    bool pinned = false;          // page-locked for the GPU's copies (set_pinning)
    std::string pin_error;        // why pinning failed; empty when pinned or not asked
  };

  // Bytes of a region, mapped as long as the view (or a copy of it) lives.
  // A system region's are read and written in place; a CUDA region's are
  // on its device: data() is a host copy made by view() (for an input) and
  // write() copies to the device.
  class View {
   public:
    char* data() const noexcept { return data_; }
    std::uint64_t size() const noexcept { return size_; }
    bool empty() const noexcept { return !mapping_; }
    // What keeps the bytes mapped (for a tensor that reads them in place).
    const std::shared_ptr<const void>& keep() const noexcept { return mapping_; }
    // Writes n <= size() bytes at the view's start; an error's text.
    std::string write(const void* src, std::size_t n) const;

   private:
    friend class SharedMemoryRegistry;
    std::shared_ptr<const void> mapping_;
    char* data_ = nullptr;    // a system region's bytes, or a CUDA region's host copy
    char* device_ = nullptr;  // a CUDA region's bytes on its device
    std::int64_t device_id_ = -1;
    const CudaIpc* ipc_ = nullptr;
    std::uint64_t size_ = 0;
  };

  SharedMemoryRegistry() = default;
  ~SharedMemoryRegistry();
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  // The calls that serve CUDA regions; without them register_cuda_region()
  // answers 501 (kNoCudaSharedMemory). Set before the first registration.
  void set_cuda_ipc(CudaIpc ipc);
  bool has_cuda() const;
  // Opens a client's cudaIpcMemHandle_t (its bytes) on `device` as region
  // `name` of byte_size bytes. Names are one space with the system regions'.
  // An error names the region: a name registered, a handle of the wrong
  // size, one the CUDA runtime cannot open (with its reason).
  std::optional<Reply> register_cuda_region(const std::string& name, const std::string& raw_handle,
                                            std::int64_t device, std::uint64_t byte_size);

  // How regions registered from now on are pinned: `pin` returns an error's
  // text (empty on success), `unpin` undoes it. Unset: not pinned.
  void set_pinning(std::function<std::string(void*, std::size_t)> pin, std::function<void(void*)> unpin);

  // Opens shared memory object `key` and maps [offset, offset + byte_size)
  // of it as region `name`. An error names the region: a name already
  // registered, a key shm_open cannot open (with the system's reason), a
  // range beyond the object's end, byte_size 0.
  std::optional<Reply> register_region(const std::string& name, const std::string& key, std::uint64_t offset,
                                       std::uint64_t byte_size);
  // Unregisters region `name`, or every region when `name` is empty, of
  // one kind (system, or CUDA with `cuda`). A name not registered is no
  // error (as in Triton). Requests holding a View of a region keep its
  // mapping until they end.
  void unregister(std::string_view name, bool cuda = false);
  // Region `name`, or every region when empty (by name), of one kind; 404
  // for a name not registered as that kind.
  std::optional<Reply> status(std::string_view name, std::vector<RegionStatus>* out, bool cuda = false) const;
  // The bytes `ref` names, for tensor `who` ("input 'x' of model 'm'"):
  // 404 when the region is not registered, 400 when the range is beyond it.
  // `read`: a CUDA region's bytes are copied to the host (an input's).
  std::optional<Reply> view(const SharedMemoryRef& ref, std::string_view who, View* out,
                            bool read = true) const;
  // Regions registered now.
  std::size_t size() const;

 private:
  struct Region;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Region>, std::less<>> regions_;
  std::function<std::string(void*, std::size_t)> pin_;  // guarded by mu_
  std::function<void(void*)> unpin_;
  std::shared_ptr<const CudaIpc> ipc_;  // guarded by mu_; regions hold it too
};

}  // namespace symphony::front
