// The system shared memory extension's regions (shared_memory.hpp).
#include "symphony/front/shared_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "internal.hpp"

namespace symphony::front {
namespace {

using detail::in_quotes;

Reply invalid(std::string message) { return Reply::error(Code::kInvalidArgument, std::move(message)); }

// A non-negative integer parameter (int64 or uint64).
bool unsigned_param(const Parameter& p, std::uint64_t* out) {
  if (p.kind == Parameter::Kind::kInt && p.i >= 0) {
    *out = static_cast<std::uint64_t>(p.i);
    return true;
  }
  if (p.kind == Parameter::Kind::kUint) {
    *out = p.u;
    return true;
  }
  return false;
}

}  // namespace

std::optional<Reply> shared_memory_parameters(const std::map<std::string, Parameter>& params,
                                              std::string_view who, std::optional<SharedMemoryRef>* out) {
  out->reset();
  const auto find = [&](const char* name) -> const Parameter* {
    auto it = params.find(name);
    return it == params.end() ? nullptr : &it->second;
  };
  const Parameter* region = find("shared_memory_region");
  const Parameter* size = find("shared_memory_byte_size");
  const Parameter* offset = find("shared_memory_offset");
  if (!region && !size && !offset) return std::nullopt;
  const std::string w(who);
  if (!region || !size)
    return invalid(w + ": shared memory needs both 'shared_memory_region' and 'shared_memory_byte_size'" +
                   " (got only " +
                   (region ? "'shared_memory_region'"
                    : size ? "'shared_memory_byte_size'"
                           : "'shared_memory_offset'") +
                   ")");
  if (region->kind != Parameter::Kind::kString || region->s.empty())
    return invalid(w + ": 'shared_memory_region' must be a region's name (a non-empty string)");
  SharedMemoryRef ref;
  ref.region = region->s;
  if (!unsigned_param(*size, &ref.byte_size))
    return invalid(w + ": 'shared_memory_byte_size' must be a non-negative integer");
  if (offset && !unsigned_param(*offset, &ref.offset))
    return invalid(w + ": 'shared_memory_offset' must be a non-negative integer");
  *out = std::move(ref);
  return std::nullopt;
}

// One mapped region; unmapped when the last holder (the registry, a View)
// lets go.
struct SharedMemoryRegistry::Region {
  RegionStatus status;
  void* base = nullptr;  // the mapping, from the page holding status.offset
  std::size_t length = 0;
  char* data = nullptr;              // status.offset within the object
  std::function<void(void*)> unpin;  // set while pinned
  // A CUDA region: its bytes on status.device_id, opened through `ipc`.
  char* device = nullptr;
  std::shared_ptr<const CudaIpc> ipc;

  Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() {
    if (unpin) unpin(base);
    if (base) munmap(base, length);
    if (device) ipc->close(device, status.device_id);
  }
  bool cuda() const noexcept { return device != nullptr; }
};

std::string SharedMemoryRegistry::View::write(const void* src, std::size_t n) const {
  if (n > size_) return "a write of " + std::to_string(n) + " bytes into " + std::to_string(size_);
  if (!device_) {
    std::memcpy(data_, src, n);
    return {};
  }
  return ipc_->to_device(device_, src, n, device_id_);
}

void SharedMemoryRegistry::set_cuda_ipc(CudaIpc ipc) {
  std::lock_guard<std::mutex> lock(mu_);
  ipc_ = ipc ? std::make_shared<const CudaIpc>(std::move(ipc)) : nullptr;
}

bool SharedMemoryRegistry::has_cuda() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ipc_ != nullptr;
}

std::optional<Reply> SharedMemoryRegistry::register_cuda_region(const std::string& name,
                                                                const std::string& raw_handle,
                                                                std::int64_t device,
                                                                std::uint64_t byte_size) {
  const std::string who = "CUDA shared memory region " + in_quotes(name);
  std::shared_ptr<const CudaIpc> ipc;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ipc = ipc_;
    if (!ipc) return Reply::error(Code::kUnimplemented, std::string(kNoCudaSharedMemory));
    if (regions_.count(name)) return invalid(who + " is already registered (unregister it first)");
    if (regions_.size() >= kMaxRegions)
      return invalid(who + ": " + std::to_string(kMaxRegions) +
                     " regions are registered already (this server's limit); unregister some");
  }
  if (name.empty()) return invalid("a CUDA shared memory region needs a name");
  if (byte_size == 0) return invalid(who + ": 'byte_size' must be at least 1");
  if (device < 0) return invalid(who + ": 'device_id' " + std::to_string(device) + " is not a device");
  // cudaIpcMemHandle_t is 64 bytes (CUDA_IPC_HANDLE_SIZE).
  if (raw_handle.size() != 64)
    return invalid(who + ": 'raw_handle' is " + std::to_string(raw_handle.size()) +
                   " bytes; a cudaIpcMemHandle_t is 64");
  void* ptr = nullptr;
  if (std::string e = ipc->open(raw_handle, device, &ptr); !e.empty())
    return invalid(who + ": cannot open its handle on device " + std::to_string(device) + ": " + e);
  auto region = std::make_shared<Region>();
  region->device = static_cast<char*>(ptr);
  region->ipc = std::move(ipc);
  region->status = RegionStatus{name, "", 0, byte_size, device, false, ""};
  std::lock_guard<std::mutex> lock(mu_);
  if (regions_.count(name)) return invalid(who + " is already registered (unregister it first)");
  regions_.emplace(name, std::move(region));
  return std::nullopt;
}

SharedMemoryRegistry::~SharedMemoryRegistry() = default;

void SharedMemoryRegistry::set_pinning(std::function<std::string(void*, std::size_t)> pin,
                                       std::function<void(void*)> unpin) {
  std::lock_guard<std::mutex> lock(mu_);
  pin_ = std::move(pin);
  unpin_ = std::move(unpin);
}

std::optional<Reply> SharedMemoryRegistry::register_region(const std::string& name, const std::string& key,
                                                           std::uint64_t offset, std::uint64_t byte_size) {
  const std::string who = "system shared memory region " + in_quotes(name);
  if (name.empty()) return invalid("a system shared memory region needs a name");
  if (key.empty()) return invalid(who + ": 'key' (the shared memory object's name) is empty");
  if (byte_size == 0) return invalid(who + ": 'byte_size' must be at least 1");
  if (offset > UINT64_MAX - byte_size)
    return invalid(who + ": offset " + std::to_string(offset) + " + byte_size " + std::to_string(byte_size) +
                   " overflows");
  const auto exists = [&] { return invalid(who + " is already registered (unregister it first)"); };
  std::function<std::string(void*, std::size_t)> pin;
  std::function<void(void*)> unpin;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pin = pin_;
    unpin = unpin_;
    if (regions_.count(name)) return exists();
    if (regions_.size() >= kMaxRegions)
      return invalid(who + ": " + std::to_string(kMaxRegions) +
                     " regions are registered already (this server's limit); unregister some");
  }
  // Opened and mapped outside the lock: registration is rare, and lookups
  // of other regions need not wait for the kernel.
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int e = errno;
    return invalid(who + ": cannot open shared memory key " + in_quotes(key) + ": " + std::strerror(e));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    return invalid(who + ": cannot stat shared memory key " + in_quotes(key) + ": " + std::strerror(e));
  }
  const auto object_size = static_cast<std::uint64_t>(st.st_size);
  if (offset + byte_size > object_size) {
    close(fd);
    return invalid(who + ": offset " + std::to_string(offset) + " + byte_size " + std::to_string(byte_size) +
                   " is beyond the end of shared memory key " + in_quotes(key) + " (" +
                   std::to_string(object_size) + " bytes)");
  }
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  const std::uint64_t start = offset / page * page;
  auto region = std::make_shared<Region>();
  region->length = static_cast<std::size_t>(offset - start + byte_size);
  void* p = mmap(nullptr, region->length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(start));
  const int e = errno;
  close(fd);  // the mapping keeps the object
  if (p == MAP_FAILED)
    return invalid(who + ": cannot map shared memory key " + in_quotes(key) + ": " + std::strerror(e));
  region->base = p;
  region->data = static_cast<char*>(p) + (offset - start);
  region->status = RegionStatus{name, key, offset, byte_size, -1, false, ""};
  if (pin) {  // so that the GPU copies straight from the client's bytes
    region->status.pin_error = pin(region->base, region->length);
    region->status.pinned = region->status.pin_error.empty();
    if (region->status.pinned) region->unpin = std::move(unpin);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (regions_.count(name)) return exists();  // registered meanwhile; `region` unmaps
  regions_.emplace(name, std::move(region));
  return std::nullopt;
}

void SharedMemoryRegistry::unregister(std::string_view name, bool cuda) {
  std::vector<std::shared_ptr<const Region>> gone;  // unmapped outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = name.empty() ? regions_.begin() : regions_.find(name); it != regions_.end();) {
    if (it->second->cuda() != cuda) {
      if (!name.empty()) break;
      ++it;
      continue;
    }
    gone.push_back(std::move(it->second));
    it = regions_.erase(it);
    if (!name.empty()) break;
  }
}

std::optional<Reply> SharedMemoryRegistry::status(std::string_view name, std::vector<RegionStatus>* out,
                                                  bool cuda) const {
  out->clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty()) {
    for (const auto& [n, r] : regions_)
      if (r->cuda() == cuda) out->push_back(r->status);
    return std::nullopt;
  }
  auto it = regions_.find(name);
  if (it == regions_.end() || it->second->cuda() != cuda)
    return Reply::error(Code::kNotFound, std::string(cuda ? "no CUDA" : "no system") +
                                             " shared memory region " + in_quotes(name) + " is registered");
  out->push_back(it->second->status);
  return std::nullopt;
}

std::optional<Reply> SharedMemoryRegistry::view(const SharedMemoryRef& ref, std::string_view who, View* out,
                                                bool read) const {
  *out = View();
  std::shared_ptr<const Region> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(ref.region);
    if (it != regions_.end()) r = it->second;
  }
  if (!r)
    return Reply::error(Code::kNotFound, std::string(who) + ": no shared memory region " +
                                             in_quotes(ref.region) + " is registered");
  const std::uint64_t size = r->status.byte_size;
  if (ref.offset > size || ref.byte_size > size - ref.offset)
    return invalid(std::string(who) + ": shared_memory_offset " + std::to_string(ref.offset) +
                   " + shared_memory_byte_size " + std::to_string(ref.byte_size) +
                   " is beyond the end of shared memory region " + in_quotes(ref.region) + " (" +
                   std::to_string(size) + " bytes)");
  out->size_ = ref.byte_size;
  if (!r->cuda()) {
    out->data_ = r->data + ref.offset;
    out->mapping_ = std::move(r);
    return std::nullopt;
  }
  // On the device: an input's bytes are copied to the host now, the copy
  // held with the region.
  struct Held {
    std::shared_ptr<const Region> region;
    std::string copy;
  };
  auto held = std::make_shared<Held>(Held{r, read ? std::string(ref.byte_size, '\0') : std::string()});
  out->device_ = r->device + ref.offset;
  out->device_id_ = r->status.device_id;
  out->ipc_ = r->ipc.get();
  if (read) {
    if (std::string e = r->ipc->to_host(held->copy.data(), out->device_, ref.byte_size, out->device_id_);
        !e.empty())
      return invalid(std::string(who) + ": cannot read CUDA shared memory region " + in_quotes(ref.region) +
                     ": " + e);
    out->data_ = held->copy.data();
  }
  out->mapping_ = std::move(held);
  return std::nullopt;
}

std::size_t SharedMemoryRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.size();
}

}  // namespace symphony::front
