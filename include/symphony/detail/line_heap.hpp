// The array of a 4-ary min-heap whose 16-byte entries are placed so that the
// four children of a node share one 64-byte cache line: a sift reads one line
// per level. The timer heap (timer_queue.hpp) and the simulator's completion
// queue (sim/completion_queue.hpp) keep their entries here and differ only in
// their order and in what placing an entry records.
//
// Guarantees: allocates only in grow() and in a push past the capacity
// (which doubles it); push, remove_at and the sifts are O(log n) and call
// `place(i, e)` for every entry they store (e at index i); `before(a, b)`
// says that a belongs above b.
//
//   LineHeap<Entry> h(16);
//   auto place = [&](std::uint32_t i, const Entry& e) { h[i] = e; };
//   h.push(e, before, place);
//   Entry top = h[0];
//   h.remove_at(0, before, place);
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

namespace symphony::detail {

template <class Entry>
class LineHeap {
 public:
  static constexpr std::uint32_t kArity = 4;
  static constexpr std::size_t kLine = 64;
  static_assert(sizeof(Entry) * kArity == kLine, "LineHeap: four entries must fill one cache line");

  explicit LineHeap(std::size_t capacity) { grow(capacity); }
  LineHeap(LineHeap&& o) noexcept
      : buf_(std::exchange(o.buf_, nullptr)),
        heap_(std::exchange(o.heap_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  LineHeap& operator=(LineHeap&& o) noexcept {
    if (this != &o) {
      release();
      buf_ = std::exchange(o.buf_, nullptr);
      heap_ = std::exchange(o.heap_, nullptr);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }
  LineHeap(const LineHeap&) = delete;
  LineHeap& operator=(const LineHeap&) = delete;
  ~LineHeap() { release(); }

  std::uint32_t size() const noexcept { return size_; }
  std::uint32_t capacity() const noexcept { return capacity_; }
  Entry& operator[](std::uint32_t i) noexcept { return heap_[i]; }
  const Entry& operator[](std::uint32_t i) const noexcept { return heap_[i]; }
  static constexpr std::uint32_t parent(std::uint32_t i) noexcept { return (i - 1) / kArity; }

  // Room for `capacity` entries (never less than size()); keeps the entries.
  void grow(std::size_t capacity) {
    capacity = std::max<std::size_t>(capacity, size_);
    // heap_ = buf_ + kPad with buf_ line-aligned: the children of i,
    // kArity*i+1 .. kArity*i+kArity, sit at buf_[kArity*(i+1) ..], one line.
    auto* buf =
        static_cast<Entry*>(::operator new ((capacity + kPad) * sizeof(Entry), std::align_val_t{kLine}));
    if (size_) std::copy(heap_, heap_ + size_, buf + kPad);
    release();
    buf_ = buf;
    heap_ = buf + kPad;
    capacity_ = static_cast<std::uint32_t>(capacity);
  }

  template <class Before, class Place>
  void push(const Entry& e, Before&& before, Place&& place) {
    if (size_ == capacity_) [[unlikely]]
      grow(std::max<std::size_t>(16, 2 * std::size_t{capacity_}));
    sift_up(size_++, e, before, place);
  }

  // Removes the entry at i (REQUIRES: i < size()); the last entry fills its place.
  template <class Before, class Place>
  void remove_at(std::uint32_t i, Before&& before, Place&& place) noexcept {
    const Entry last = heap_[--size_];
    if (i == size_) return;
    if (i > 0 && before(last, heap_[parent(i)]))
      sift_up(i, last, before, place);
    else
      sift_down(i, last, before, place);
  }

  // Moves the hole at i up until e fits (before(e, parent) false), then puts e there.
  template <class Before, class Place>
  void sift_up(std::uint32_t i, const Entry& e, Before&& before, Place&& place) noexcept {
    const Entry* const h = heap_;
    while (i > 0) {
      const std::uint32_t p = parent(i);
      if (!before(e, h[p])) break;
      place(i, h[p]);
      i = p;
    }
    place(i, e);
  }
  // Moves the hole at i down until e fits, then puts e there.
  template <class Before, class Place>
  void sift_down(std::uint32_t i, const Entry& e, Before&& before, Place&& place) noexcept {
    Entry* const h = heap_;
    const std::uint32_t size = size_;
    for (;;) {
      const std::uint32_t first = i * kArity + 1;
      if (first >= size) break;
      std::uint32_t best = first;
      const std::uint32_t last = first + kArity < size ? first + kArity : size;
      for (std::uint32_t c = first + 1; c < last; ++c)
        if (before(h[c], h[best])) best = c;
      if (!before(h[best], e)) break;
      place(i, h[best]);
      i = best;
    }
    place(i, e);
  }

 private:
  static constexpr std::size_t kPad = kArity - 1;

  void release() noexcept {
    if (buf_) ::operator delete (buf_, std::align_val_t{kLine});
    buf_ = heap_ = nullptr;
  }

  Entry* buf_ = nullptr;
  Entry* heap_ = nullptr;
  std::uint32_t size_ = 0, capacity_ = 0;
};

}  // namespace symphony::detail
