// The profiler's measurement loop (libtorch).
#include "symphony/server/profiler.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>

#include "symphony/server/torch_model.hpp"

namespace symphony::server {

std::vector<std::uint32_t> profile_grid(std::uint32_t max_batch) {
  std::vector<std::uint32_t> g;
  for (std::uint32_t b = 1; b < max_batch; b *= 2) g.push_back(b);
  if (max_batch >= 1) g.push_back(max_batch);
  return g;
}

namespace {

void sync(const c10::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

bool is_oom(const std::string& msg) {
  return msg.find("out of memory") != std::string::npos || msg.find("Out of memory") != std::string::npos ||
         msg.find("OutOfMemory") != std::string::npos || msg.find("can't allocate memory") != std::string::npos;
}

}  // namespace

Result<MeasuredProfile> profile_model(TorchModel& model, std::size_t replica, const ProfileOptions& opts) {
  if (opts.max_batch == 0) return Status(Errc::kInvalidArgument, "profile: max_batch must be at least 1");
  if (opts.repeats < 1) return Status(Errc::kInvalidArgument, "profile: repeats must be at least 1");
  const c10::Device dev = model.device(replica);
  MeasuredProfile out;
  out.model = model.name();
  out.device = dev.str();
  for (const auto& s : model.inputs()) out.inputs.push_back(s.to_string());
  const std::vector<std::uint32_t> grid = profile_grid(opts.max_batch);
  out.stopped_because = "reached max_batch " + std::to_string(opts.max_batch);
  std::vector<double> samples;
  for (std::size_t gi = 0; gi < grid.size(); ++gi) {
    const std::uint32_t b = grid[gi];
    std::vector<at::Tensor> batch;
    try {
      batch = model.dummy_batch(b, dev);
    } catch (const std::exception& e) {
      if (!is_oom(e.what())) return Status(Errc::kFailedPrecondition, "profile: " + std::string(e.what()));
      out.stopped_because = "batch " + std::to_string(b) + " does not fit in memory";
      break;
    }
    samples.clear();
    bool oom = false;
    for (int i = 0; i < opts.warmup + opts.repeats && !oom; ++i) {
      sync(dev);
      const auto t0 = std::chrono::steady_clock::now();
      Result<c10::IValue> r = model.forward(replica, batch);
      sync(dev);
      const auto t1 = std::chrono::steady_clock::now();
      if (!r.ok()) {
        if (is_oom(r.status().message())) {
          oom = true;
          break;
        }
        return Status(Errc::kFailedPrecondition, "profile: model '" + model.name() + "' failed at batch " +
                                                     std::to_string(b) + ": " + r.status().message());
      }
      if (i >= opts.warmup) samples.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
    if (oom) {
      out.stopped_because = "batch " + std::to_string(b) + " ran out of device memory";
      if (dev.is_cuda()) {
        batch.clear();
      }
      break;
    }
    std::sort(samples.begin(), samples.end());
    const auto pick = [&](double q) {
      const auto i = static_cast<std::size_t>(q * static_cast<double>(samples.size() - 1) + 0.5);
      return Duration::nanoseconds(static_cast<std::int64_t>(samples[i]));
    };
    ProfilePointStats p{b, pick(0.5), pick(0.99)};
    // Keep the table monotone: noise can make a larger batch look faster.
    if (!out.points.empty()) {
      p.median = max(p.median, out.points.back().median);
      p.p99 = max(p.p99, out.points.back().p99);
    }
    out.points.push_back(p);
    out.max_batch = b;
    if (opts.progress) opts.progress(b, gi + 1, grid.size());
    if (p.median > opts.max_latency) {
      out.stopped_because = "batch " + std::to_string(b) + " already takes " + std::to_string(p.median.to_ms()) +
                            " ms (limit " + std::to_string(opts.max_latency.to_ms()) + " ms)";
      break;
    }
  }
  if (out.points.empty()) return Status(Errc::kFailedPrecondition, "profile: not even batch 1 ran: " + out.stopped_because);
  // Least-squares fit of the medians.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(out.points.size());
  for (const auto& p : out.points) {
    const double x = p.batch, y = static_cast<double>(p.median.ns());
    sx += x; sy += y; sxx += x * x; sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  const double a = den != 0 ? (n * sxy - sx * sy) / den : 0.0;
  out.alpha = Duration::nanoseconds(static_cast<std::int64_t>(std::max(0.0, a)));
  out.beta = Duration::nanoseconds(static_cast<std::int64_t>(std::max(0.0, (sy - a * sx) / n)));
  return out;
}

}  // namespace symphony::server
