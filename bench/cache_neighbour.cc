// cache_neighbour MIB SECONDS: a neighbour on the shared last-level cache.
// Walks a buffer of MIB MiB one cache line at a time (read, modify, write) for
// SECONDS, then exits: a stand-in for another tenant streaming through the L3
// that a VM shares, which is what the core benchmark's slow spells look like
// (bench/experiments/core_neighbour.sh, bench/results/core.md).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MIB SECONDS\n", argv[0]);
    return 2;
  }
  const long mib = std::strtol(argv[1], nullptr, 10);
  const double seconds = std::strtod(argv[2], nullptr);
  if (mib < 1 || mib > 4096 || !(seconds > 0) || seconds > 3600) {
    std::fprintf(stderr, "error: MIB must be in [1, 4096] and SECONDS in (0, 3600]\n");
    return 2;
  }
  std::vector<unsigned char> buf(static_cast<std::size_t>(mib) << 20, 1);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  unsigned long passes = 0;
  while (std::chrono::steady_clock::now() < until) {
    for (std::size_t i = 0; i < buf.size(); i += 64) buf[i] = static_cast<unsigned char>(buf[i] + 1);
    ++passes;
  }
  std::printf("%lu passes over %ld MiB\n", passes, mib);
  return buf[0] == 0 ? 1 : 0;  // keeps the writes observable
}
