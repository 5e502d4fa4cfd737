// cache_probe MIB LINES SECONDS: what a cache line beyond the L2 costs.
// Each round reads, modifies and writes LINES random lines of a MIB MiB buffer,
// each line's address depending on the previous line's value, so the misses
// follow one another as a cold scheduler state's do (a model's slot, then its
// queue's last request, ...). Prints nanoseconds per round and per line.
// bench/experiments/cache_probe.sh runs it alone and beside cache_neighbour;
// bench/results/core.md reads the numbers.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MIB LINES SECONDS\n", argv[0]);
    return 2;
  }
  const long mib = std::strtol(argv[1], nullptr, 10);
  const long lines_per_round = std::strtol(argv[2], nullptr, 10);
  const double seconds = std::strtod(argv[3], nullptr);
  if (mib < 1 || mib > 4096 || lines_per_round < 1 || lines_per_round > 1024 || !(seconds > 0) ||
      seconds > 3600) {
    std::fprintf(stderr, "error: MIB must be in [1, 4096], LINES in [1, 1024] and SECONDS in (0, 3600]\n");
    return 2;
  }
  const std::uint64_t lines = static_cast<std::uint64_t>(mib) << 14;  // 64-byte lines
  std::vector<std::uint64_t> buf(lines * 8, 1);                       // one word used per line
  std::uint64_t x = 0x9E3779B97F4A7C15ull, carry = 0, rounds = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int r = 0; r < 10000; ++r, ++rounds) {
      for (long j = 0; j < lines_per_round; ++j) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::uint64_t& w = buf[((x ^ carry) % lines) * 8];  // the address waits for the last load
        w += 1;
        carry = w & 1;
      }
    }
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double per_round = elapsed * 1e9 / static_cast<double>(rounds);
  std::printf("%ld MiB, %ld lines: %.1f ns per round, %.1f ns per line\n", mib, lines_per_round, per_round,
              per_round / static_cast<double>(lines_per_round));
  return carry > 1 ? 1 : 0;  // keeps the loads observable
}
