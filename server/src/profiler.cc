// The profiler's measurement loop (libtorch).
#include "symphony/server/profiler.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>

#include "symphony/server/batch_staging.hpp"
#include "symphony/server/torch_model.hpp"

namespace symphony::server {

std::vector<std::uint32_t> profile_grid(std::uint32_t max_batch) {
  // Four sizes per octave, 2^k * (1, 1.25, 1.5, 1.75): 1, 2, 3, 4, 5, 6, 7, 8,
  // 10, 12, 14, 16, 20, 24, 28, 32, ... Latency between powers of two is not
  // linear on every device (on CPU, 12 costs more than halfway from 8 to 16).
  std::vector<std::uint32_t> g;
  for (std::uint64_t base = 1; base < max_batch; base *= 2)
    for (std::uint64_t j = 0; j < 4; ++j) {
      const std::uint64_t b = base + base * j / 4;
      if (b < max_batch && (g.empty() || b > g.back())) g.push_back(static_cast<std::uint32_t>(b));
    }
  if (max_batch >= 1) g.push_back(max_batch);
  return g;
}

namespace {

// The host memory pool's block alignment (front/host_memory_pool.hpp,
// HostMemoryPool::kAlignment), which the server library does not link.
constexpr std::int64_t kPoolAlignment = 64;

// Replaces y by its least-squares non-decreasing fit (pool adjacent violators).
void isotonic_fit(std::vector<double>& y) {
  std::vector<double> sum;
  std::vector<std::size_t> count;
  for (double v : y) {
    sum.push_back(v);
    count.push_back(1);
    while (sum.size() > 1 && sum[sum.size() - 2] / static_cast<double>(count[count.size() - 2]) >
                                 sum.back() / static_cast<double>(count.back())) {
      sum[sum.size() - 2] += sum.back();
      count[count.size() - 2] += count.back();
      sum.pop_back();
      count.pop_back();
    }
  }
  std::size_t i = 0;
  for (std::size_t k = 0; k < sum.size(); ++k)
    for (std::size_t j = 0; j < count[k]; ++j) y[i++] = sum[k] / static_cast<double>(count[k]);
}

bool is_oom(const std::string& msg) {
  return msg.find("out of memory") != std::string::npos || msg.find("Out of memory") != std::string::npos ||
         msg.find("OutOfMemory") != std::string::npos ||
         msg.find("can't allocate memory") != std::string::npos;
}

}  // namespace

Result<profile_io::MeasuredProfile> profile_model(TorchModel& model, std::size_t replica,
                                                  const ProfileOptions& opts) {
  if (opts.max_batch == 0) return Status(Errc::kInvalidArgument, "profile: max_batch must be at least 1");
  if (opts.repeats < 1) return Status(Errc::kInvalidArgument, "profile: repeats must be at least 1");
  const c10::Device dev = model.device(replica);
  profile_io::MeasuredProfile out;
  out.model = model.name();
  out.device = dev.str();
  for (const auto& s : model.profile_inputs()) out.inputs.push_back(s.to_string());
  std::vector<std::uint32_t> grid = profile_grid(opts.max_batch);
  out.stopped_because = "reached max_batch " + std::to_string(opts.max_batch);

  // Served CPU batches are gathered from their requests' samples, run and
  // split: so are the profile's (run_batch, the executor's own call). What
  // that staging counts is taken back at the end: the model served nothing.
  const bool served_path = dev.is_cpu();
  StagingCounters& staged = *model.staging_counters();
  const StagingCounters::Snapshot staged_before = staged.snapshot();
  struct TakeBack {
    StagingCounters& c;
    StagingCounters::Snapshot before;
    ~TakeBack() {
      const StagingCounters::Snapshot now = c.snapshot();
      c.batches.fetch_sub(now.batches - before.batches, std::memory_order_relaxed);
      c.views.fetch_sub(now.views - before.views, std::memory_order_relaxed);
      c.samples.fetch_sub(now.samples - before.samples, std::memory_order_relaxed);
      c.bytes_copied.fetch_sub(now.bytes_copied - before.bytes_copied, std::memory_order_relaxed);
      c.staging_ns.fetch_sub(now.staging_ns - before.staging_ns, std::memory_order_relaxed);
    }
  } take_back{staged, staged_before};
  // One size's batch: b requests of one sample each, landed as serve's host
  // memory pool lands requests that arrive one after another (each input in
  // a block of its own, blocks side by side, rounded to kPoolAlignment), so
  // that staging makes the batch a view where it would for them and copies
  // where it would; or the batch itself on the device.
  struct Batch {
    std::vector<at::Tensor> tensors;                // on the device (CUDA)
    std::vector<std::vector<at::Tensor>> requests;  // the samples (CPU)
    std::vector<RequestInputs> inputs;              // over `requests`
  };
  auto make_batch = [&](std::uint32_t b) {
    Batch out;
    if (!served_path) {
      out.tensors = model.dummy_batch(b, dev);
      return out;
    }
    const std::vector<at::Tensor> samples = model.dummy_batch(b, dev);
    const auto block = [](std::int64_t n) {
      return (n + kPoolAlignment - 1) / kPoolAlignment * kPoolAlignment;
    };
    std::int64_t bytes = 0;
    for (const at::Tensor& s : samples) bytes += block(static_cast<std::int64_t>(s.nbytes()) / b) * b;
    const at::Tensor landed =
        at::empty({std::max<std::int64_t>(bytes, 1)}, at::TensorOptions().dtype(at::kByte));
    std::int64_t off = 0;
    out.requests.resize(b);
    for (std::uint32_t k = 0; k < b; ++k)
      for (const at::Tensor& s : samples) {
        const at::Tensor from = s.select(0, k);
        const auto n = static_cast<std::int64_t>(from.nbytes());
        at::Tensor to = landed.narrow(0, off, n).view(from.scalar_type()).view(from.sizes());
        to.copy_(from);
        out.requests[k].push_back(std::move(to));
        off += block(n);
      }
    for (const auto& r : out.requests) out.inputs.push_back(RequestInputs{&r, false});
    return out;
  };
  // Times one batch (ns); 0 with *oom set when it ran out of memory.
  auto time_one = [&](const Batch& batch, bool* oom) -> Result<double> {
    double ran = 0;
    Status failed;
    if (!served_path) {
      Result<c10::IValue> r = model.load_forward(replica, batch.tensors, &ran);
      if (!r.ok()) failed = r.status();
    } else {
      const auto b = static_cast<std::uint32_t>(batch.inputs.size());
      Result<std::vector<c10::IValue>> r = Status(Errc::kInternal, "the run gate did not run the batch");
      SYMPHONY_RETURN_IF_ERROR(model.load_run(replica, b, [&] {
        const auto t0 = std::chrono::steady_clock::now();
        if (!opts.overlap) {
          r = model.run_batch(replica, batch.inputs);
        } else {
          TorchModel::StagedBatch s = model.stage(replica, batch.inputs, 0);
          const auto t1 = std::chrono::steady_clock::now();
          r = model.run_staged(replica, std::move(s), batch.inputs);
          const auto t2 = std::chrono::steady_clock::now();
          ran = std::chrono::duration<double, std::nano>(std::max(t1 - t0, t2 - t1)).count();
          return;
        }
        ran = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      }));
      if (!r.ok()) failed = r.status();
    }
    if (!failed.ok()) {
      if (is_oom(failed.message())) {
        *oom = true;
        return 0.0;
      }
      return failed;
    }
    return ran;
  };

  // Warm-up, growing the batch: find where memory or the latency limit ends
  // the grid. The first call at a new size is slow (kernels are selected and
  // compiled per shape); warm-up absorbs it.
  std::vector<Batch> batches;
  Duration before;  // the last size's time
  for (std::size_t gi = 0; gi < grid.size(); ++gi) {
    const std::uint32_t b = grid[gi];
    if (gi > 0) {
      const Duration expect = before * static_cast<std::int64_t>(b) / static_cast<std::int64_t>(grid[gi - 1]);
      if (expect > opts.run_limit) {
        out.stopped_because = "batch " + std::to_string(b) + " would take about " + format_ms(expect) +
                              " ms (run limit " + format_ms(opts.run_limit) + " ms)";
        break;
      }
    }
    Batch batch;
    try {
      batch = make_batch(b);
    } catch (const std::exception& e) {
      if (!is_oom(e.what())) return Status(Errc::kFailedPrecondition, "profile: " + std::string(e.what()));
      out.stopped_because = "batch " + std::to_string(b) + " does not fit in memory";
      break;
    }
    bool oom = false;
    double last = 0;
    for (int i = 0; i < std::max(1, opts.warmup) && !oom; ++i) {
      Result<double> t = time_one(batch, &oom);
      if (!t.ok())
        return Status(Errc::kFailedPrecondition, "profile: model '" + model.name() + "' failed at batch " +
                                                     std::to_string(b) + ": " + t.status().message());
      last = *t;
    }
    if (oom) {
      out.stopped_because = "batch " + std::to_string(b) + " ran out of device memory";
      break;
    }
    const Duration took = Duration::nanoseconds(static_cast<std::int64_t>(last));
    if (gi > 0 && took > opts.run_limit) {
      out.stopped_because = "batch " + std::to_string(b) + " takes " + format_ms(took) + " ms (run limit " +
                            format_ms(opts.run_limit) + " ms)";
      break;
    }
    before = took;
    batches.push_back(std::move(batch));
    if (took > opts.max_latency) {
      out.stopped_because = "batch " + std::to_string(b) + " already takes " + format_ms(took) +
                            " ms (limit " + format_ms(opts.max_latency) + " ms)";
      break;
    }
  }
  grid.resize(batches.size());
  if (grid.empty())
    return Status(Errc::kFailedPrecondition, "profile: not even batch 1 ran: " + out.stopped_because);

  // Measurement: every round visits every size once, in a shuffled order, so
  // that the cost of switching shapes between batches (as serving does) is in
  // the numbers, and slow drifts spread over all sizes alike.
  std::vector<std::vector<double>> samples(grid.size());
  std::vector<std::size_t> order(grid.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::uint64_t rng = 0x9e3779b97f4a7c15ULL;
  for (int round = 0; round < opts.repeats; ++round) {
    for (std::size_t i = order.size(); i > 1; --i) {  // Fisher-Yates with a fixed LCG: reproducible
      rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
      std::swap(order[i - 1], order[(rng >> 33) % i]);
    }
    for (std::size_t i : order) {
      bool oom = false;
      Result<double> t = time_one(batches[i], &oom);
      if (!t.ok() || oom)
        return Status(Errc::kFailedPrecondition,
                      "profile: model '" + model.name() + "' failed at batch " + std::to_string(grid[i]) +
                          ": " + (oom ? std::string("out of memory") : t.status().message()));
      samples[i].push_back(*t);
    }
    if (opts.progress)
      opts.progress(grid.back(), static_cast<std::size_t>(round + 1), static_cast<std::size_t>(opts.repeats));
  }
  std::vector<double> med(grid.size()), p90(grid.size()), p99(grid.size());
  for (std::size_t i = 0; i < grid.size(); ++i) {
    std::vector<double>& v = samples[i];
    std::sort(v.begin(), v.end());
    const auto pick = [&](double q) {
      return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
    };
    med[i] = pick(0.5);
    p90[i] = pick(0.9);
    p99[i] = pick(0.99);
  }
  // l(b) must not decrease; noise can make a larger batch look faster. The
  // least-squares monotone fit averages a stray sample with its neighbours
  // instead of carrying it to every larger batch.
  isotonic_fit(med);
  isotonic_fit(p90);
  isotonic_fit(p99);
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const auto ns = [](double x) { return Duration::nanoseconds(static_cast<std::int64_t>(x)); };
    const Duration m = ns(med[i]), q90 = max(ns(p90[i]), m), q99 = max(ns(p99[i]), q90);
    out.points.push_back({grid[i], m, q90, q99});
  }
  out.max_batch = grid.back();
  if (out.points.empty())
    return Status(Errc::kFailedPrecondition, "profile: not even batch 1 ran: " + out.stopped_because);
  // Least-squares fit of the medians.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(out.points.size());
  for (const auto& p : out.points) {
    const double x = p.batch, y = static_cast<double>(p.median.ns());
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  const double a = den != 0 ? (n * sxy - sx * sy) / den : 0.0;
  out.alpha = Duration::nanoseconds(static_cast<std::int64_t>(std::max(0.0, a)));
  out.beta = Duration::nanoseconds(static_cast<std::int64_t>(std::max(0.0, (sy - a * sx) / n)));
  return out;
}

LatencyProfile slowest_profile(const std::vector<LatencyProfile>& profiles) {
  if (profiles.size() == 1) return profiles.front();
  std::uint32_t max_b = profiles.front().max_batch();
  for (const LatencyProfile& p : profiles) max_b = std::min(max_b, p.max_batch());
  std::vector<ProfilePoint> points;
  for (std::uint32_t b = 1; b <= max_b; ++b) {
    Duration l = Duration::zero();
    for (const LatencyProfile& p : profiles) l = max(l, p.latency(b));
    points.push_back({b, l});
  }
  // Each profile is positive and non-decreasing in b, so their maximum is too.
  return *LatencyProfile::from_table(points, max_b);
}

}  // namespace symphony::server
