// Build-time knobs and small macros shared by every core header.
//
// Tunables are overridable: define the macro before including any Symphony
// header (or with -D) to change it.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>

// Size of a cache line, used to keep the producer and consumer sides of the
// lock-free rings apart. 64 bytes on every x86-64 and most Arm parts.
#ifndef SYMPHONY_CACHELINE_SIZE
#define SYMPHONY_CACHELINE_SIZE 64
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SYMPHONY_LIKELY(x) __builtin_expect(!!(x), 1)
#define SYMPHONY_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SYMPHONY_ALWAYS_INLINE inline __attribute__((always_inline))
#define SYMPHONY_PREFETCH(p) __builtin_prefetch(p)
#else
#define SYMPHONY_LIKELY(x) (x)
#define SYMPHONY_UNLIKELY(x) (x)
#define SYMPHONY_ALWAYS_INLINE inline
#define SYMPHONY_PREFETCH(p) ((void)(p))
#endif

// SYMPHONY_ASSERT checks internal invariants in debug builds and compiles out
// under NDEBUG. Preconditions a caller can violate are reported through Status
// instead; this is for "cannot happen" states.
#ifndef SYMPHONY_ASSERT
#ifdef NDEBUG
#define SYMPHONY_ASSERT(cond) ((void)0)
#else
#define SYMPHONY_ASSERT(cond)                                                                        \
  ((cond) ? (void)0                                                                                  \
          : (std::fprintf(stderr, "%s:%d: SYMPHONY_ASSERT(%s) failed\n", __FILE__, __LINE__, #cond), \
             std::abort()))
#endif
#endif

namespace symphony {
inline constexpr std::size_t kCacheLineSize = SYMPHONY_CACHELINE_SIZE;
}  // namespace symphony
