// HostMemoryPool: blocks within the region, each returned exactly once,
// exhaustion refused at once with a message naming the pool, free runs
// merged, the counters, pinning through the hooks, and many threads.
#include "symphony/front/host_memory_pool.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace symphony::front {
namespace {

std::shared_ptr<HostMemoryPool> make_pool(std::uint64_t bytes, HostMemoryPoolOptions o = {}) {
  o.byte_size = bytes;
  auto p = HostMemoryPool::create(std::move(o));
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

TEST(HostMemoryPoolTest, HandsOutAlignedBlocksInsideTheRegion) {
  auto pool = make_pool(1 << 20);
  std::vector<std::shared_ptr<char>> blocks;
  for (std::size_t n : {1, 63, 64, 65, 1000, 0}) {
    blocks.push_back(pool->acquire(n));
    ASSERT_NE(blocks.back(), nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(blocks.back().get()) % HostMemoryPool::kAlignment, 0u);
    EXPECT_TRUE(pool->owns(blocks.back().get(), std::max<std::size_t>(n, 1)));
    std::memset(blocks.back().get(), 0x5a, std::max<std::size_t>(n, 1));  // writable
  }
  // Rounded to the alignment: 64 + 64 + 64 + 128 + 1024 + 64.
  EXPECT_EQ(pool->stats().in_use, 1408u);
  EXPECT_EQ(pool->stats().blocks_in_use, 6u);
  EXPECT_FALSE(pool->owns(blocks.front().get(), (1 << 20) + 1));
  int outside = 0;
  EXPECT_FALSE(pool->owns(&outside));
}

TEST(HostMemoryPoolTest, ReturnsABlockExactlyOnceWhenItsLastCopyDies) {
  auto pool = make_pool(4096);
  std::shared_ptr<char> a = pool->acquire(1000);
  std::shared_ptr<const void> copy = a;  // as a tensor's owner keeps it
  EXPECT_EQ(pool->stats().blocks_in_use, 1u);
  a.reset();
  EXPECT_EQ(pool->stats().blocks_in_use, 1u);
  EXPECT_EQ(pool->stats().in_use, 1024u);
  copy.reset();
  const HostMemoryPoolStats s = pool->stats();
  EXPECT_EQ(s.blocks_in_use, 0u);
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.high_water, 1024u);
  EXPECT_EQ(s.acquired, 1u);
}

TEST(HostMemoryPoolTest, RefusesAtOnceWhenNoFreeRunIsLargeEnough) {
  auto pool = make_pool(4096);
  std::shared_ptr<char> a = pool->acquire(3000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(pool->acquire(2000), nullptr);
  EXPECT_EQ(pool->stats().exhausted, 1u);
  const std::string why = pool->exhausted_message(2000);
  EXPECT_NE(why.find("host memory pool (4 KiB)"), std::string::npos) << why;
  EXPECT_NE(why.find("2.0 KiB input"), std::string::npos) << why;
  EXPECT_NE(why.find("--pinned-memory-pool-byte-size"), std::string::npos) << why;
  EXPECT_NE(pool->acquire(1000), nullptr);  // what fits still fits
  a.reset();
  EXPECT_NE(pool->acquire(4096), nullptr);  // the whole region once free
  EXPECT_EQ(pool->acquire(4097), nullptr);  // never more than the region
  EXPECT_EQ(pool->exhausted_message(8192),
            "this request's 8 KiB input is larger than the whole host memory pool (4 KiB); give the server a "
            "larger --pinned-memory-pool-byte-size");
}

TEST(HostMemoryPoolTest, MergesFreeRunsSoTheWholeRegionComesBack) {
  auto pool = make_pool(64 * 8);
  std::vector<std::shared_ptr<char>> b;
  for (int i = 0; i < 8; ++i) b.push_back(pool->acquire(64));
  EXPECT_EQ(pool->acquire(1), nullptr);
  // Freed out of order: 1, 3, 5, 7, then 0, 2, 4, 6; the region is whole
  // again only after the last.
  for (int i : {1, 3, 5, 7, 0, 2, 4, 6}) {
    b[static_cast<std::size_t>(i)].reset();
    if (i != 6) {
      EXPECT_EQ(pool->acquire(64 * 8), nullptr);
    }
  }
  EXPECT_NE(pool->acquire(64 * 8), nullptr);
}

TEST(HostMemoryPoolTest, PutsEachBlockRightAfterTheOneBeforeWhenItFits) {
  auto pool = make_pool(64 * 8);
  std::shared_ptr<char> a = pool->acquire(64), b = pool->acquire(64);
  EXPECT_EQ(b.get(), a.get() + 64);
  const char* hole = a.get();
  a.reset();  // a hole of the same size before b: the next block still goes after b
  std::shared_ptr<char> c = pool->acquire(64);
  EXPECT_EQ(c.get(), b.get() + 64);
  std::shared_ptr<char> d = pool->acquire(64 * 5);  // the rest of the region
  EXPECT_EQ(d.get(), c.get() + 64);
  std::shared_ptr<char> e = pool->acquire(64);  // no room after d: the smallest run that fits, the hole
  EXPECT_EQ(e.get(), hole);
}

TEST(HostMemoryPoolTest, BlocksOutliveThePoolObject) {
  std::shared_ptr<char> b;
  {
    auto pool = make_pool(4096);
    b = pool->acquire(100);
  }
  std::memset(b.get(), 1, 100);  // the region is released with the last block
  b.reset();
}

TEST(HostMemoryPoolTest, PinsAndUnpinsThroughTheHooks) {
  void* pinned = nullptr;
  void* unpinned = nullptr;
  std::size_t pinned_bytes = 0;
  {
    HostMemoryPoolOptions o;
    o.pin = [&](void* p, std::size_t n) {
      pinned = p;
      pinned_bytes = n;
      return std::string();
    };
    o.unpin = [&](void* p) { unpinned = p; };
    auto pool = make_pool(1000, o);
    EXPECT_TRUE(pool->pinned());
    EXPECT_TRUE(pool->stats().pinned);
    EXPECT_EQ(pinned_bytes, 1024u);  // rounded to the alignment
    EXPECT_TRUE(pool->owns(pinned, 1024));
  }
  EXPECT_EQ(unpinned, pinned);

  HostMemoryPoolOptions bad;
  bad.byte_size = 4096;
  bad.pin = [](void*, std::size_t) { return std::string("cudaErrorNoDevice"); };
  auto refused = HostMemoryPool::create(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cannot pin the host memory pool of 4 KiB: cudaErrorNoDevice"),
            std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(HostMemoryPool::create({}).ok());  // no size
}

TEST(HostMemoryPoolTest, GrowsWithinItsReservationWhileBlocksStayPut) {
  HostMemoryPoolOptions o;
  o.max_byte_size = 16384;
  auto pool = make_pool(4096, o);
  EXPECT_EQ(pool->max_byte_size(), 16384u);
  std::shared_ptr<char> a = pool->acquire(3000);
  std::memset(a.get(), 0x11, 3000);
  EXPECT_EQ(pool->acquire(2000), nullptr);  // 1 KiB free
  ASSERT_TRUE(pool->grow(8192).ok());
  EXPECT_EQ(pool->byte_size(), 8192u);
  EXPECT_EQ(pool->stats().byte_size, 8192u);
  // The free run at the old end and the added range are one run now.
  std::shared_ptr<char> b = pool->acquire(5000);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(pool->owns(b.get(), 5000));
  std::memset(b.get(), 0x22, 5000);                             // writable
  EXPECT_EQ(static_cast<unsigned char>(a.get()[2999]), 0x11u);  // the old block is where it was
  EXPECT_TRUE(pool->grow(100).ok());                            // smaller: nothing
  EXPECT_EQ(pool->byte_size(), 8192u);
  const Status beyond = pool->grow(32768);
  EXPECT_EQ(beyond.code(), Errc::kCapacityExceeded);
  EXPECT_NE(beyond.message().find("reserved for at most 16 KiB"), std::string::npos) << beyond.message();
  EXPECT_EQ(pool->byte_size(), 8192u);
  a.reset();
  b.reset();
  EXPECT_EQ(pool->stats().in_use, 0u);
  EXPECT_NE(pool->acquire(8192), nullptr);  // all of it is one free run again
  // Without max_byte_size the pool keeps its size.
  auto fixed = make_pool(4096);
  EXPECT_EQ(fixed->max_byte_size(), 4096u);
  EXPECT_FALSE(fixed->grow(8192).ok());
  // Room to grow that cannot be reserved (beyond the address space): the
  // pool is made at its size, without it.
  HostMemoryPoolOptions huge;
  huge.max_byte_size = std::uint64_t{1} << 62;
  auto unreserved = make_pool(4096, huge);
  ASSERT_NE(unreserved, nullptr);
  EXPECT_EQ(unreserved->max_byte_size(), 4096u);
  EXPECT_NE(unreserved->acquire(4096), nullptr);
}

// shrink() gives back the free end beyond a size, in whole pages, and while
// blocks at the end keep it from reaching that size, hands out blocks below
// it where they fit (and beyond only where nothing below fits).
TEST(HostMemoryPoolTest, ShrinksToItsFreeEndAndKeepsBlocksBelowTheSizeUntilItGetsThere) {
  HostMemoryPoolOptions o;
  o.max_byte_size = 1 << 20;
  auto pool = make_pool(4096, o);
  ASSERT_TRUE(pool->grow(65536).ok());
  std::shared_ptr<char> a = pool->acquire(1000);   // [0, 1024)
  std::shared_ptr<char> b = pool->acquire(1000);   // [1024, 2048)
  std::shared_ptr<char> c = pool->acquire(40000);  // [2048, 42048)
  EXPECT_EQ(c.get() - a.get(), 2048);
  EXPECT_TRUE(pool->shrink(65536));  // not smaller: nothing to do
  EXPECT_FALSE(pool->shrink(8192));  // c lies beyond: the free end from the page after it
  EXPECT_EQ(pool->byte_size(), 45056u);
  EXPECT_EQ(pool->stats().byte_size, 45056u);
  // Only beyond 8 KiB is there room for this one: handed out there.
  std::shared_ptr<char> d = pool->acquire(2000);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d.get() - a.get(), 42048);
  c.reset();
  // Right after d fits too (960 bytes), but below 8 KiB comes first.
  std::shared_ptr<char> e = pool->acquire(900);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e.get() - a.get(), 2048);
  d.reset();
  EXPECT_TRUE(pool->shrink(8192));
  EXPECT_EQ(pool->byte_size(), 8192u);
  EXPECT_FALSE(pool->owns(a.get() + 8192));
  EXPECT_EQ(pool->acquire(8192 - 3008 + 64), nullptr);
  std::shared_ptr<char> f = pool->acquire(8192 - 3008);  // the rest, to the new end
  ASSERT_NE(f, nullptr);
  f.reset();
  // Grown again: the memory given back is usable again.
  ASSERT_TRUE(pool->grow(16384).ok());
  std::shared_ptr<char> g = pool->acquire(12000);
  ASSERT_NE(g, nullptr);
  std::memset(g.get(), 0x33, 12000);
  a.reset();
  b.reset();
  e.reset();
  g.reset();
  EXPECT_EQ(pool->stats().in_use, 0u);
}

// A pinned pool gives back whole grown ranges (unpinned once each), never
// the region's own.
TEST(HostMemoryPoolTest, APinnedPoolShrinksByWholeGrownRanges) {
  std::vector<void*> pins, unpins;
  {
    HostMemoryPoolOptions o;
    o.max_byte_size = 1 << 16;
    o.pin = [&](void* p, std::size_t) {
      pins.push_back(p);
      return std::string();
    };
    o.unpin = [&](void* p) { unpins.push_back(p); };
    auto pool = make_pool(4096, o);
    ASSERT_TRUE(pool->grow(8192).ok());
    ASSERT_TRUE(pool->grow(16384).ok());
    ASSERT_EQ(pins.size(), 3u);
    EXPECT_TRUE(pool->shrink(5000));  // inside the growth at 4 KiB: kept whole
    EXPECT_EQ(pool->byte_size(), 8192u);
    ASSERT_EQ(unpins.size(), 1u);
    EXPECT_EQ(unpins[0], pins[2]);
    EXPECT_TRUE(pool->shrink(64));
    EXPECT_EQ(pool->byte_size(), 4096u);
    ASSERT_EQ(unpins.size(), 2u);
    EXPECT_EQ(unpins[1], pins[1]);
    EXPECT_NE(pool->acquire(4096), nullptr);
  }
  ASSERT_EQ(unpins.size(), 3u);  // the region's own, once, with the pool
  EXPECT_EQ(unpins[2], pins[0]);
}

TEST(HostMemoryPoolTest, PinsEachGrowthAndUnpinsEveryRangeOnce) {
  std::vector<std::pair<void*, std::size_t>> pins;
  std::vector<void*> unpins;
  {
    HostMemoryPoolOptions o;
    o.max_byte_size = 1 << 16;
    o.pin = [&](void* p, std::size_t n) {
      pins.emplace_back(p, n);
      return pins.size() == 3 ? std::string("cudaErrorMemoryAllocation") : std::string();
    };
    o.unpin = [&](void* p) { unpins.push_back(p); };
    auto pool = make_pool(4096, o);
    ASSERT_TRUE(pool->grow(8192).ok());
    ASSERT_EQ(pins.size(), 2u);
    EXPECT_EQ(static_cast<char*>(pins[1].first), static_cast<char*>(pins[0].first) + 4096);
    EXPECT_EQ(pins[1].second, 4096u);
    const Status refused = pool->grow(16384);  // the third pin fails: the pool stays as it was
    EXPECT_NE(refused.message().find("cannot pin 8 KiB more of the host memory pool (8 KiB now): "
                                     "cudaErrorMemoryAllocation"),
              std::string::npos)
        << refused.message();
    EXPECT_EQ(pool->byte_size(), 8192u);
    EXPECT_EQ(pool->acquire(8192 + 64), nullptr);
  }
  ASSERT_EQ(unpins.size(), 2u);  // the region's range and the growth's, not the refused one
  EXPECT_EQ(unpins[0], pins[0].first);
  EXPECT_EQ(unpins[1], pins[1].first);
}

TEST(HostMemoryPoolTest, ManyThreadsReturnEveryBlock) {
  auto pool = make_pool(1 << 16);
  std::vector<std::thread> threads;
  std::atomic<std::uint64_t> got{0}, refused{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::shared_ptr<char>> held;
      for (int i = 0; i < 20000; ++i) {
        if (held.size() > 8 || (!held.empty() && rng() % 2)) {
          held.erase(held.begin() + static_cast<long>(rng() % held.size()));
          continue;
        }
        const std::size_t n = 1 + rng() % 4000;
        if (auto b = pool->acquire(n)) {
          b.get()[n - 1] = static_cast<char>(i);
          held.push_back(std::move(b));
          got.fetch_add(1);
        } else {
          refused.fetch_add(1);
        }
      }
    });
  for (auto& th : threads) th.join();
  const HostMemoryPoolStats s = pool->stats();
  EXPECT_EQ(s.blocks_in_use, 0u);
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.acquired, got.load());
  EXPECT_EQ(s.exhausted, refused.load());
  EXPECT_LE(s.high_water, s.byte_size);
  EXPECT_NE(pool->acquire(1 << 16), nullptr);  // every run merged back
}

TEST(HostMemoryPoolTest, WritesByteSizes) {
  EXPECT_EQ(byte_size_string(512), "512 B");
  EXPECT_EQ(byte_size_string(256 << 20), "256 MiB");
  EXPECT_EQ(byte_size_string(1536ull << 20), "1.5 GiB");
}

}  // namespace
}  // namespace symphony::front
