// The protocol's datatypes, the outcome -> reply table, the statistics
// extension's fields from a service's sums and the overload hold's spread
// (docs/front.md).
#include "symphony/front/protocol.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

#include "symphony/random.hpp"
#include "symphony/request_times.hpp"

namespace symphony::front {

std::optional<DataType> parse_datatype(std::string_view name) noexcept {
  return datatype_from_protocol(name);
}

std::string_view to_string(DataType t) noexcept { return datatype_info(t).protocol; }

std::size_t element_size(DataType t) noexcept { return datatype_info(t).bytes; }

std::string tensor_name(std::string_view base, std::size_t i, std::size_t n) {
  return n == 1 ? std::string(base) : std::string(base) + std::to_string(i);
}

TensorSpec metadata_spec(const symphony::TensorSpec& spec, std::string name, bool batched) {
  TensorSpec t;
  t.name = std::move(name);
  t.datatype = spec.dtype;
  t.shape.reserve(spec.shape.size() + 1);
  if (batched) t.shape.push_back(-1);
  t.shape.insert(t.shape.end(), spec.shape.begin(), spec.shape.end());
  return t;
}

std::string shape_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::optional<std::uint64_t> element_count(const Shape& s, std::uint64_t limit) noexcept {
  std::uint64_t n = 1;
  for (std::int64_t d : s) {
    if (d < 0) return std::nullopt;
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && n > limit / u) return std::nullopt;
    n *= u;
  }
  if (n > limit) return std::nullopt;
  return n;
}

std::string_view to_string(Code c) noexcept {
  switch (c) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case Code::kNotFound:
      return "NOT_FOUND";
    case Code::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case Code::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case Code::kInternal:
      return "INTERNAL";
    case Code::kUnavailable:
      return "UNAVAILABLE";
    case Code::kCancelled:
      return "CANCELLED";
    case Code::kUnimplemented:
      return "UNIMPLEMENTED";
  }
  return "UNKNOWN";
}

int http_status(Code c) noexcept {
  switch (c) {
    case Code::kOk:
      return 200;
    case Code::kInvalidArgument:
      return 400;
    case Code::kNotFound:
      return 404;
    case Code::kDeadlineExceeded:
      return 504;
    case Code::kResourceExhausted:
      return 429;
    case Code::kInternal:
      return 500;
    case Code::kUnavailable:
      return 503;
    case Code::kCancelled:
      return 499;
    case Code::kUnimplemented:
      return 501;
  }
  return 500;
}

Reply reply_for_outcome(Outcome o, DropReason reason, std::string_view error, std::string_view model,
                        Duration budget, std::optional<Duration> target) {
  Reply r;
  r.accepted = true;
  r.outcome = o;
  r.reason = reason;
  const std::string who = "model '" + std::string(model) + "'";
  switch (o) {
    case Outcome::kOk:
    case Outcome::kLate:
      r.code = Code::kOk;
      break;
    case Outcome::kError:
      r.code = Code::kInternal;
      r.message = who + " raised: " + std::string(error);
      break;
    case Outcome::kDropped:
      switch (reason) {
        case DropReason::kQueueFull:
        case DropReason::kOverload:
        case DropReason::kPushedOut:
          r.code = Code::kResourceExhausted;
          break;
        case DropReason::kShutdown:
          r.code = Code::kUnavailable;
          break;
        case DropReason::kCancelled:
          r.code = Code::kCancelled;
          break;
        default:  // infeasible, expired, batch_policy
          r.code = Code::kDeadlineExceeded;
          break;
      }
      r.message = drop_text(reason, who, budget, target);
      if (!error.empty()) r.message += " (" + std::string(error) + ")";
      break;
  }
  return r;
}

Duration spread_hold(Duration hold) noexcept {
  thread_local Rng rng(static_cast<std::uint64_t>(SteadyClock{}.now().ns()) ^
                       reinterpret_cast<std::uintptr_t>(&rng));
  return Duration::nanoseconds(
      static_cast<std::int64_t>(static_cast<double>(hold.ns()) * (0.5 + rng.uniform())));
}

ModelStatistics model_statistics(std::string name, std::string version, const StatisticsSums& sums) {
  const auto ns = [](Duration d) { return static_cast<std::uint64_t>(std::max<std::int64_t>(d.ns(), 0)); };
  ModelStatistics st;
  st.name = std::move(name);
  st.version = std::move(version);
  st.last_inference_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(sums.last_inference_ms, 0));
  st.inference_count = sums.inference_count;
  const std::uint64_t succeeded = sums.ok + sums.late;
  st.success = {succeeded, ns(sums.success)};
  st.fail = {sums.dropped + sums.errors, ns(sums.fail)};
  st.queue = {succeeded, ns(sums.queue)};
  st.compute_infer = {succeeded, ns(sums.compute)};
  for (const auto& [size, b] : sums.batches) {
    st.execution_count += b.count;
    ModelStatistics::Batch out;
    out.batch_size = size;
    out.compute_infer = {b.count, ns(b.exec)};
    st.batch_stats.push_back(out);
  }
  return st;
}

}  // namespace symphony::front
