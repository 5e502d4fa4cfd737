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
  char* data = nullptr;  // status.offset within the object

  Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() {
    if (base) munmap(base, length);
  }
};

SharedMemoryRegistry::~SharedMemoryRegistry() = default;

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
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  region->status = RegionStatus{name, key, offset, byte_size};
  std::lock_guard<std::mutex> lock(mu_);
  if (regions_.count(name)) return exists();  // registered meanwhile; `region` unmaps
  regions_.emplace(name, std::move(region));
  return std::nullopt;
}

void SharedMemoryRegistry::unregister(std::string_view name) {
  std::map<std::string, std::shared_ptr<const Region>, std::less<>> gone;  // unmapped outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty()) {
    gone.swap(regions_);
    return;
  }
  if (auto it = regions_.find(name); it != regions_.end()) {
    gone.insert(regions_.extract(it));
  }
}

std::optional<Reply> SharedMemoryRegistry::status(std::string_view name,
                                                  std::vector<RegionStatus>* out) const {
  out->clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty()) {
    for (const auto& [n, r] : regions_) out->push_back(r->status);
    return std::nullopt;
  }
  auto it = regions_.find(name);
  if (it == regions_.end())
    return Reply::error(Code::kNotFound,
                        "no system shared memory region " + in_quotes(name) + " is registered");
  out->push_back(it->second->status);
  return std::nullopt;
}

std::optional<Reply> SharedMemoryRegistry::view(const SharedMemoryRef& ref, std::string_view who,
                                                View* out) const {
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
  out->data_ = r->data + ref.offset;
  out->size_ = ref.byte_size;
  out->mapping_ = std::move(r);
  return std::nullopt;
}

std::size_t SharedMemoryRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.size();
}

}  // namespace symphony::front
