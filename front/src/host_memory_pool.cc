// HostMemoryPool: one mapped region, best-fit blocks (host_memory_pool.hpp).
#include "symphony/front/host_memory_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace symphony::front {

nlohmann::json to_json(const HostMemoryPoolStats& s) {
  return {{"byte_size", s.byte_size},
          {"pinned", s.pinned},
          {"in_use", s.in_use},
          {"high_water", s.high_water},
          {"blocks_in_use", s.blocks_in_use},
          {"acquired", s.acquired},
          {"exhausted", s.exhausted}};
}

// The region and its free runs. Blocks' deleters hold it, so the region
// outlives the pool object until the last block returns.
struct HostMemoryPool::State {
  char* base = nullptr;
  std::uint64_t reserved = 0;          // mapped: what the pool may grow to
  std::atomic<std::uint64_t> size{0};  // in use by the pool; grows under mu
  bool pinned = false;
  std::function<std::string(void*, std::size_t)> pin;
  std::function<void(void*)> unpin;
  std::vector<char*> pinned_ranges;  // each pin's start, for unpin

  std::mutex grow_mu;  // grow(): one at a time
  mutable std::mutex mu;
  std::map<std::uint64_t, std::uint64_t> free_by_offset;           // offset -> length
  std::set<std::pair<std::uint64_t, std::uint64_t>> free_by_size;  // (length, offset)
  HostMemoryPoolStats stats;
  std::uint64_t after_last = 0;    // where the last block handed out ended
  std::uint64_t limit = kNoLimit;  // a shrink() not reached yet: blocks below it while they fit
  static constexpr std::uint64_t kNoLimit = ~std::uint64_t{0};

  ~State() {
    if (!base) return;
    if (unpin)
      for (char* p : pinned_ranges) unpin(p);
    munmap(base, reserved);
  }

  void insert_free(std::uint64_t off, std::uint64_t len) {
    free_by_offset.emplace(off, len);
    free_by_size.emplace(len, off);
  }
  void erase_free(std::map<std::uint64_t, std::uint64_t>::iterator it) {
    free_by_size.erase({it->second, it->first});
    free_by_offset.erase(it);
  }

  // Returns [off, off + len) to the free runs, merged with its neighbours.
  void release(std::uint64_t off, std::uint64_t len) noexcept {
    std::lock_guard<std::mutex> lock(mu);
    stats.in_use -= len;
    --stats.blocks_in_use;
    auto next = free_by_offset.lower_bound(off);
    if (next != free_by_offset.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        off = prev->first;
        len += prev->second;
        erase_free(prev);
      }
    }
    if (next != free_by_offset.end() && off + len == next->first) {
      len += next->second;
      erase_free(next);
    }
    insert_free(off, len);
  }
};

namespace {

std::uint64_t round_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

std::string byte_size_string(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0 || v == static_cast<double>(static_cast<std::uint64_t>(v)))
    std::snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(v), kUnits[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

Result<std::shared_ptr<HostMemoryPool>> HostMemoryPool::create(HostMemoryPoolOptions o) {
  if (o.byte_size == 0)
    return Status(Errc::kInvalidArgument, "the host memory pool needs a size above 0 bytes");
  auto s = std::make_shared<State>();
  const std::uint64_t size = round_up(o.byte_size, kAlignment);
  s->reserved = std::max(size, round_up(o.max_byte_size, kAlignment));
  // Mapped, not allocated: pages are committed when first written (or when
  // pinned), so an ample default, and room to grow, cost nothing until
  // requests use them.
  const auto map = [](std::uint64_t n) {
    return mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  };
  void* p = map(s->reserved);
  if (p == MAP_FAILED && s->reserved > size) {  // no room to grow here (strict overcommit): the size alone
    s->reserved = size;
    p = map(size);
  }
  if (p == MAP_FAILED)
    return Status(Errc::kInvalidArgument, "cannot reserve the host memory pool of " +
                                              byte_size_string(s->reserved) + ": " + std::strerror(errno) +
                                              " (choose a smaller --pinned-memory-pool-byte-size)");
  s->base = static_cast<char*>(p);
  if (o.pin) {
    std::string why = o.pin(s->base, size);
    if (!why.empty())
      return Status(Errc::kInternal, "cannot pin the host memory pool of " + byte_size_string(size) + ": " +
                                         why + " (choose a smaller --pinned-memory-pool-byte-size)");
    s->pinned = true;
    s->pin = std::move(o.pin);
    s->unpin = std::move(o.unpin);
    s->pinned_ranges.push_back(s->base);
  }
  s->size.store(size, std::memory_order_relaxed);  // published with the pool
  s->stats.byte_size = size;
  s->stats.pinned = s->pinned;
  s->insert_free(0, size);
  return std::shared_ptr<HostMemoryPool>(new HostMemoryPool(std::move(s)));
}

HostMemoryPool::~HostMemoryPool() = default;

std::shared_ptr<char> HostMemoryPool::acquire(std::size_t bytes) noexcept {
  const std::uint64_t len = round_up(std::max<std::uint64_t>(bytes, 1), kAlignment);
  State& s = *state_;
  std::uint64_t off = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    // Right after the last block when it fits there (requests that arrive
    // one after another then lie side by side, and a batch of them is a
    // view: batch_staging.hpp); else the smallest run that holds it.
    // A shrink not reached yet keeps blocks below its size while one fits there.
    std::uint64_t run = 0;
    const auto below = [&](std::uint64_t at) { return at + len <= s.limit; };
    if (auto at = s.free_by_offset.find(s.after_last);
        at != s.free_by_offset.end() && at->second >= len && below(at->first)) {
      off = at->first;
      run = at->second;
      s.erase_free(at);
    } else {
      auto fit = s.free_by_size.lower_bound({len, 0});
      if (fit == s.free_by_size.end()) {
        ++s.stats.exhausted;
        return nullptr;
      }
      if (s.limit != State::kNoLimit)
        for (auto f = fit; f != s.free_by_size.end(); ++f)
          if (below(f->second)) {
            fit = f;
            break;
          }
      off = fit->second;
      run = fit->first;
      s.free_by_size.erase(fit);
      s.free_by_offset.erase(off);
    }
    s.after_last = off + len;
    if (run > len) s.insert_free(off + len, run - len);
    s.stats.in_use += len;
    s.stats.high_water = std::max(s.stats.high_water, s.stats.in_use);
    ++s.stats.blocks_in_use;
    ++s.stats.acquired;
  }
  try {
    return std::shared_ptr<char>(s.base + off,
                                 [state = state_, off, len](char*) { state->release(off, len); });
  } catch (...) {  // the control block could not be allocated: the block goes back
    s.release(off, len);
    return nullptr;
  }
}

Status HostMemoryPool::grow(std::uint64_t byte_size) {
  State& s = *state_;
  const std::uint64_t want = round_up(byte_size, kAlignment);
  std::lock_guard<std::mutex> growing(s.grow_mu);  // one grow at a time: `size` changes only here
  const std::uint64_t have = s.size.load(std::memory_order_relaxed);
  if (want <= have) return {};
  if (want > s.reserved)
    return Status(Errc::kCapacityExceeded, "cannot grow the host memory pool to " + byte_size_string(want) +
                                               ": it was reserved for at most " +
                                               byte_size_string(s.reserved));
  if (s.pinned) {  // outside `mu`: acquires go on while the range is pinned
    std::string why = s.pin(s.base + have, want - have);
    if (!why.empty())
      return Status(Errc::kInternal, "cannot pin " + byte_size_string(want - have) +
                                         " more of the host memory pool (" + byte_size_string(have) +
                                         " now): " + why);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.pinned) s.pinned_ranges.push_back(s.base + have);
  // The added range joins the free run that ends where it begins, if any.
  std::uint64_t off = have, len = want - have;
  if (!s.free_by_offset.empty()) {
    auto last = std::prev(s.free_by_offset.end());
    if (last->first + last->second == have) {
      off = last->first;
      len += last->second;
      s.erase_free(last);
    }
  }
  s.insert_free(off, len);
  s.stats.byte_size = want;
  s.limit = State::kNoLimit;
  s.size.store(want, std::memory_order_release);  // owns() may see the new end
  return {};
}

bool HostMemoryPool::shrink(std::uint64_t byte_size) {
  State& s = *state_;
  const std::uint64_t want = round_up(std::max<std::uint64_t>(byte_size, 1), kAlignment);
  std::lock_guard<std::mutex> growing(s.grow_mu);  // `size` changes only under it
  const std::uint64_t have = s.size.load(std::memory_order_relaxed);
  static const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  std::uint64_t cut = have;
  bool reached = true;
  std::vector<char*> unpin;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.limit = State::kNoLimit;
    if (want >= have) return true;
    // The free run at the end, if one is there.
    auto last = s.free_by_offset.empty() ? s.free_by_offset.end() : std::prev(s.free_by_offset.end());
    if (last != s.free_by_offset.end() && last->first + last->second != have) last = s.free_by_offset.end();
    reached = last != s.free_by_offset.end() && last->first <= want;
    if (!reached) s.limit = want;  // blocks at the end: later, once they have come back
    if (last == s.free_by_offset.end()) return false;
    cut = round_up(std::max(want, last->first), page);
    if (s.pinned) {  // whole pinned ranges only, and never the region's first
      std::uint64_t at = have;
      for (char* p : s.pinned_ranges) {
        const auto o = static_cast<std::uint64_t>(p - s.base);
        if (o > 0 && o >= cut) at = std::min(at, o);
      }
      cut = at;
    }
    if (cut >= have) return reached;
    const std::uint64_t off = last->first;
    s.erase_free(last);
    if (cut > off) s.insert_free(off, cut - off);
    std::erase_if(s.pinned_ranges, [&](char* p) {
      if (p < s.base + cut) return false;
      unpin.push_back(p);
      return true;
    });
    s.after_last = std::min(s.after_last, cut);
    s.stats.byte_size = cut;
    s.size.store(cut, std::memory_order_release);
  }
  // No block can lie there any more: its whole pages go back to the system
  // (a grown range may begin inside a page).
  for (char* p : unpin) s.unpin(p);
  if (const std::uint64_t from = round_up(cut, page); from < have)
    (void)madvise(s.base + from, have - from, MADV_DONTNEED);
  return reached;
}

std::string HostMemoryPool::exhausted_message(std::size_t bytes) const {
  const HostMemoryPoolStats st = stats();
  if (bytes > st.byte_size)
    return "this request's " + byte_size_string(bytes) +
           " input is larger than the whole host memory pool (" + byte_size_string(st.byte_size) +
           "); give the server a larger --pinned-memory-pool-byte-size";
  return "the host memory pool (" + byte_size_string(st.byte_size) + (st.pinned ? ", pinned" : "") +
         ") cannot hold this request's " + byte_size_string(bytes) + " input now (" +
         byte_size_string(st.in_use) + " in use by " + std::to_string(st.blocks_in_use) +
         (st.blocks_in_use == 1 ? " input" : " inputs") +
         " of requests in flight); try again later, or give the server a larger "
         "--pinned-memory-pool-byte-size";
}

HostMemoryPoolStats HostMemoryPool::stats() const noexcept {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

std::uint64_t HostMemoryPool::byte_size() const noexcept {
  return state_->size.load(std::memory_order_acquire);  // pairs with grow()'s release
}
std::uint64_t HostMemoryPool::max_byte_size() const noexcept { return state_->reserved; }
bool HostMemoryPool::pinned() const noexcept { return state_->pinned; }

bool HostMemoryPool::owns(const void* p, std::size_t n) const noexcept {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const auto base = reinterpret_cast<std::uintptr_t>(state_->base);
  const std::uint64_t size = byte_size();
  return at >= base && n <= size && at - base <= size - n;
}

}  // namespace symphony::front
