// libFuzzer target for the cluster's message decoders (wire.hpp).
//
// Every input is decoded as whatever kind its header names, and by every
// decoder directly; nothing may crash, read out of bounds or hit undefined
// behaviour (built with -fsanitize=fuzzer,address,undefined). A message that
// decodes is re-encoded (the hot ones rebuilt from their views with the
// builders) and must decode and re-encode to the same bytes, and the views
// of the hot messages are walked to their last entry.
//
//   clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined \
//     -Iextensions/rdma/include -Iinclude extensions/rdma/fuzz/wire_fuzzer.cc \
//     extensions/rdma/src/protocol/wire.cc -o wire_fuzzer && ./wire_fuzzer -max_total_time=60
// (cmake/RunFuzzer.cmake does this for CTest: the test wire_fuzz.)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <utility>
#include <vector>

#include "symphony/cluster/wire.hpp"

using namespace symphony::cluster::wire;

namespace {

template <class T, class Decode>
void roundtrip(std::span<const std::uint8_t> msg, Decode decode) {
  auto r = decode(msg);
  if (!r.ok()) return;
  const std::vector<std::uint8_t> again = encode(*r);
  auto r2 = decode(std::span<const std::uint8_t>(again));
  if (!r2.ok()) std::abort();  // a decoded message must re-encode to a valid one
  if (encode(*r2) != again) std::abort();
}

// The hot messages have builders, not encode(): rebuild one from its view.
std::vector<std::uint8_t> rebuild(const SubmitView& v) {
  SubmitBuilder b;
  for (std::uint32_t i = 0; i < v.entries.size(); ++i) b.add(v.entries[i]);
  return std::move(b).finish();
}
std::vector<std::uint8_t> rebuild(const BatchView& v) {
  BatchBuilder b(v.batch, v.device, v.model, v.predicted_ns, v.exec_budget_ns, v.planned_size);
  for (std::uint32_t i = 0; i < v.entries.size(); ++i) b.add(v.entries[i]);
  return std::move(b).finish();
}
std::vector<std::uint8_t> rebuild(const OutputsView& v) {
  OutputsBuilder b(v.batch, v.batch_size, v.status, v.error);
  std::size_t at = 0;
  for (std::uint32_t i = 0; i < v.entries.size(); ++i) {
    const OutputEntry e = v.entries[i];
    b.add(e.request, v.payload.subspan(at, e.len));
    at += e.len;
  }
  return std::move(b).finish();
}
std::vector<std::uint8_t> rebuild(const OutcomesView& v) {
  OutcomesBuilder b(v.text);
  for (std::uint32_t i = 0; i < v.entries.size(); ++i) b.add(v.entries[i]);
  return std::move(b).finish();
}

template <class Decode>
void rebuilt(std::span<const std::uint8_t> msg, Decode decode) {
  auto r = decode(msg);
  if (!r.ok()) return;
  const std::vector<std::uint8_t> again = rebuild(*r);
  auto r2 = decode(std::span<const std::uint8_t>(again));
  if (!r2.ok()) std::abort();
  if (rebuild(*r2) != again) std::abort();
}

std::uint64_t sink = 0;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> msg(data, size);
  (void)validate(msg);
  roundtrip<Hello>(msg, decode_hello);
  roundtrip<Welcome>(msg, decode_welcome);
  roundtrip<Refuse>(msg, decode_refuse);
  roundtrip<Register>(msg, decode_register);
  roundtrip<Registered>(msg, decode_registered);
  roundtrip<FrontendJoined>(msg, decode_frontend_joined);
  roundtrip<FrontendLeft>(msg, decode_frontend_left);
  roundtrip<PoolInfo>(msg, decode_pool_info);
  roundtrip<PoolAck>(msg, decode_pool_ack);
  roundtrip<PoolDrop>(msg, decode_pool_drop);
  roundtrip<Ping>(msg, decode_ping);
  roundtrip<Pong>(msg, decode_pong);
  roundtrip<Goodbye>(msg, decode_goodbye);
  roundtrip<BatchDone>(msg, decode_batch_done);
  roundtrip<Placement>(msg, decode_placement);
  roundtrip<PlacementDone>(msg, decode_placement_done);
  roundtrip<Cancel>(msg, decode_cancel);
  roundtrip<StatsRequest>(msg, decode_stats_request);
  roundtrip<Stats>(msg, decode_stats);
  roundtrip<ModelControl>(msg, decode_model_control);
  roundtrip<ModelControlDone>(msg, decode_model_control_done);
  roundtrip<ModelTable>(msg, decode_model_table);
  roundtrip<ModelLoad>(msg, decode_model_load);
  roundtrip<ModelLoadDone>(msg, decode_model_load_done);
  roundtrip<ModelUnload>(msg, decode_model_unload);
  roundtrip<LeaseRequest>(msg, decode_lease_request);
  roundtrip<LeaseGrant>(msg, decode_lease_grant);
  roundtrip<LeaseEnd>(msg, decode_lease_end);
  roundtrip<Admission>(msg, decode_admission);
  rebuilt(msg, decode_submit);
  rebuilt(msg, decode_batch);
  rebuilt(msg, decode_outputs);
  rebuilt(msg, decode_outcomes);
  if (auto s = decode_submit(msg); s.ok())
    for (std::uint32_t i = 0; i < s->entries.size(); ++i) sink += s->entries[i].addr;
  if (auto b = decode_batch(msg); b.ok())
    for (std::uint32_t i = 0; i < b->entries.size(); ++i) sink += b->entries[i].len;
  if (auto o = decode_outputs(msg); o.ok()) {
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < o->entries.size(); ++i) total += o->entries[i].len;
    if (total != o->payload.size()) std::abort();
    if (!o->payload.empty()) sink += o->payload.back();
    if (!o->error.empty()) sink += static_cast<std::uint8_t>(o->error.back());
  }
  if (auto c = decode_outcomes(msg); c.ok())
    for (std::uint32_t i = 0; i < c->entries.size(); ++i) sink += c->entries[i].reason;
  return 0;
}
