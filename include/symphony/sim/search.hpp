// Searches over simulation runs: goodput (the highest offered rate that every
// model serves with a bad rate of at most 1 %, docs/architecture.md#goodput) and the minimum
// number of GPUs that serves a target rate.
//
// Both are generic over the run: `eval(x)` runs one simulation (at offered
// rate x, or with x GPUs) and returns a result R; `bad(r)` extracts the worst
// per-model bad rate from it. A run passes when bad(r) <= max_bad_rate. Each
// step is reported to `on_step` (progress lines, logs). Same seed in every
// run: the searches are deterministic.
//
// Goodput: run at the start rate; double it while runs pass, halve it while
// they fail, then bisect between the highest passing and the lowest failing
// rate until they are within rel_tolerance of each other. The answer is the
// highest passing rate (0 when even min_rate fails). Bad rate is not always
// monotone in the offered rate (random arrivals), so the answer is "a rate
// that passes, with a failing one at most rel_tolerance above it".
//
// Minimum GPUs: the smallest n in [1, max_gpus] whose run passes, assuming
// more GPUs never hurt: exponential probing from the start, then bisection
// over integers. Nothing found: n = 0.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace symphony::sim {

struct SearchStep {
  double x = 0;               // offered rate (goodput search) or GPU count
  double worst_bad_rate = 0;  // the run's worst per-model bad rate
  bool pass = false;
};

struct GoodputSearchOptions {
  double max_bad_rate = 0.01;
  double start = 1000;           // first rate tried (requests per second); a good guess saves runs
  double rel_tolerance = 0.005;  // stop when (fail - pass) <= rel_tolerance * pass
  double min_rate = 1e-3;        // below this the search gives up: goodput 0
  double max_rate = 1e12;        // above this it stops doubling
  std::uint32_t max_steps = 64;
};

template <class R>
struct GoodputSearchResult {
  double goodput = 0;           // highest passing rate
  double lowest_failing = 0;    // lowest failing rate (0 if none failed)
  std::optional<R> at_goodput;  // the run at `goodput`
  std::vector<SearchStep> steps;
};

// eval: double rate -> R; bad: const R& -> double; on_step: (const SearchStep&, std::size_t index) -> void.
template <class Eval, class Bad, class OnStep>
auto find_goodput(Eval&& eval, Bad&& bad, const GoodputSearchOptions& opt, OnStep&& on_step) {
  using R = std::decay_t<decltype(eval(0.0))>;
  GoodputSearchResult<R> res;
  double lo = 0, hi = 0;  // highest pass, lowest fail (0: none yet)
  auto run = [&](double x) {
    R r = eval(x);
    const double b = bad(r);
    SearchStep s{x, b, b <= opt.max_bad_rate};
    res.steps.push_back(s);
    on_step(s, res.steps.size() - 1);
    if (s.pass) {
      if (x > lo) {
        lo = x;
        res.at_goodput = std::move(r);
      }
    } else if (hi == 0 || x < hi) {
      hi = x;
    }
    return s.pass;
  };
  double x = std::clamp(opt.start, opt.min_rate, opt.max_rate);
  if (run(x)) {
    while (res.steps.size() < opt.max_steps && x < opt.max_rate) {
      x = std::min(x * 2, opt.max_rate);
      if (!run(x)) break;
    }
  } else {
    while (res.steps.size() < opt.max_steps) {
      x /= 2;
      if (x < opt.min_rate) break;
      if (run(x)) break;
    }
  }
  while (lo > 0 && hi > 0 && hi - lo > opt.rel_tolerance * lo && res.steps.size() < opt.max_steps)
    run(lo + (hi - lo) / 2);
  res.goodput = lo;
  res.lowest_failing = hi;
  return res;
}

struct MinGpusSearchOptions {
  double max_bad_rate = 0.01;
  std::uint32_t start = 1;  // first GPU count tried
  std::uint32_t max_gpus = 1024;
};

template <class R>
struct MinGpusSearchResult {
  std::uint32_t gpus = 0;  // 0: even max_gpus fails
  std::optional<R> at_min;
  std::vector<SearchStep> steps;
};

// eval: std::uint32_t gpus -> R; bad and on_step as for find_goodput.
template <class Eval, class Bad, class OnStep>
auto find_min_gpus(Eval&& eval, Bad&& bad, const MinGpusSearchOptions& opt, OnStep&& on_step) {
  using R = std::decay_t<decltype(eval(std::uint32_t{1}))>;
  MinGpusSearchResult<R> res;
  std::uint32_t lo = 0, hi = 0;  // highest failing, lowest passing (0: none yet)
  auto run = [&](std::uint32_t n) {
    R r = eval(n);
    const double b = bad(r);
    SearchStep s{static_cast<double>(n), b, b <= opt.max_bad_rate};
    res.steps.push_back(s);
    on_step(s, res.steps.size() - 1);
    if (s.pass) {
      if (hi == 0 || n < hi) {
        hi = n;
        res.at_min = std::move(r);
      }
    } else {
      lo = std::max(lo, n);
    }
    return s.pass;
  };
  const std::uint32_t max_gpus = std::max<std::uint32_t>(opt.max_gpus, 1);
  std::uint32_t n = std::clamp<std::uint32_t>(opt.start, 1, max_gpus);
  if (run(n)) {
    // Probe down quickly: halve while passing.
    while (n > 1) {
      n = std::max<std::uint32_t>(1, n / 2);
      if (!run(n)) break;
    }
  } else {
    while (n < max_gpus) {
      n = std::min<std::uint32_t>(max_gpus, n * 2);
      if (run(n)) break;
    }
  }
  while (hi != 0 && hi - lo > 1) run(lo + (hi - lo) / 2);
  res.gpus = hi;
  return res;
}

}  // namespace symphony::sim
