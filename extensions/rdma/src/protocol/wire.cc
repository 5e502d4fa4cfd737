// The cluster's wire protocol. Every message's layout is written once, as a
// fields() description below; visitors apply it in each direction (Measure
// sizes a message, Put writes it, Reader decodes it with bounds checks, At
// reads fixed-size entries and the header unchecked), so an encoder and its
// decoder cannot disagree. A decoder's checks beyond the layout (ranges,
// relations between fields) are in check() (see wire.hpp for the layout
// and the rules).
#include "symphony/cluster/wire.hpp"

#include <algorithm>
#include <concepts>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "symphony/types.hpp"

namespace symphony::cluster::wire {
namespace {

// ---- byte order: little-endian, whatever the host --------------------------------

// Written out per width rather than as loops: GCC at -O2 keeps an 8-step
// byte loop as a loop; these compile to single loads and stores.
template <std::size_t N>
constexpr std::uint64_t load_le(const std::uint8_t* p) noexcept {
  static_assert(N == 1 || N == 2 || N == 4 || N == 8);
  if constexpr (N == 1) {
    return p[0];
  } else if constexpr (N == 2) {
    return std::uint64_t{p[0]} | (std::uint64_t{p[1]} << 8);
  } else if constexpr (N == 4) {
    return std::uint64_t{p[0]} | (std::uint64_t{p[1]} << 8) | (std::uint64_t{p[2]} << 16) |
           (std::uint64_t{p[3]} << 24);
  } else {
    return load_le<4>(p) | (load_le<4>(p + 4) << 32);
  }
}
template <std::size_t N>
constexpr void store_le(std::uint8_t* p, std::uint64_t v) noexcept {
  static_assert(N == 1 || N == 2 || N == 4 || N == 8);
  if constexpr (N == 1) {
    p[0] = static_cast<std::uint8_t>(v);
  } else if constexpr (N == 2) {
    p[0] = static_cast<std::uint8_t>(v);
    p[1] = static_cast<std::uint8_t>(v >> 8);
  } else if constexpr (N == 4) {
    p[0] = static_cast<std::uint8_t>(v);
    p[1] = static_cast<std::uint8_t>(v >> 8);
    p[2] = static_cast<std::uint8_t>(v >> 16);
    p[3] = static_cast<std::uint8_t>(v >> 24);
  } else {
    store_le<4>(p, v);
    store_le<4>(p + 4, v >> 32);
  }
}

// A field's value as bits and back: integers and enums, checked against the
// width that the description gives the field.
template <std::size_t N, class T>
constexpr std::uint64_t to_bits(T v) noexcept {
  static_assert(sizeof(T) == N && (std::is_integral_v<T> || std::is_enum_v<T>),
                "a field's type must have the width that its description gives it");
  if constexpr (std::is_enum_v<T>)
    return static_cast<std::uint64_t>(static_cast<std::underlying_type_t<T>>(v));
  else
    return static_cast<std::uint64_t>(v);
}
template <std::size_t N, class T>
constexpr T from_bits(std::uint64_t v) noexcept {
  static_assert(sizeof(T) == N && (std::is_integral_v<T> || std::is_enum_v<T>),
                "a field's type must have the width that its description gives it");
  if constexpr (std::is_enum_v<T>)
    return static_cast<T>(static_cast<std::underlying_type_t<T>>(v));
  else
    return static_cast<T>(v);
}

// The fixed-width field names of every visitor, forwarded to its num<N>().
template <class D>
struct Widths {
  template <class T>
  constexpr void u8(const char* name, T& x) {
    static_cast<D*>(this)->template num<1>(name, x);
  }
  template <class T>
  constexpr void u16(const char* name, T& x) {
    static_cast<D*>(this)->template num<2>(name, x);
  }
  template <class T>
  constexpr void u32(const char* name, T& x) {
    static_cast<D*>(this)->template num<4>(name, x);
  }
  template <class T>
  constexpr void u64(const char* name, T& x) {
    static_cast<D*>(this)->template num<8>(name, x);
  }
  template <class T>
  constexpr void i64(const char* name, T& x) {
    static_cast<D*>(this)->template num<8>(name, x);
  }
};

// How many items a list or an entry array may hold (checked by the decoder
// against the bytes left, before anything is allocated).
struct Bounds {
  std::uint32_t max = 0;
  bool nonempty = false;
};

// ---- the layouts: one description per message --------------------------------------
//
// A description calls, in wire order:
//   u8/u16/u32/u64/i64(name, field)   an integer or enum of that width
//   pad(n)                            n zero bytes, ignored when read
//   str(name, s, limit)               a u32 length and the bytes (std::string or string_view)
//   n = count(name, container)        a u32 count of a list that comes later
//   list(name, n, vector, bounds, item)   n items, each described by item(visitor, x)
//   entries(name, n, view, bounds)    n fixed-size entries (a hot message's EntryView)
//   payload(name, span, entries)      the bytes of all entries' lens, concatenated
// The names are the ones a decoder's error gives. M is the message or a
// const one (the encoding visitors).

template <class M, class T>
concept Of = std::same_as<std::remove_const_t<M>, T>;

template <class V, Of<Header> M>
constexpr void fields(V& v, M& h) {
  v.u32("magic", h.magic);
  v.u16("version", h.version);
  v.u16("kind", h.kind);
  v.u32("length", h.length);
  v.u32("flags", h.flags);
}

template <class V, Of<Hello> M>
constexpr void fields(V& v, M& m) {
  v.u8("role", m.role);
  v.pad(3);
  v.u32("pid", m.pid);
  v.u64("incarnation", m.incarnation);
  v.u64("term", m.term);
  v.str("token", m.token, kMaxTokenBytes);
  v.str("name", m.name, kMaxNameBytes);
  v.str("address", m.address, kMaxNameBytes);
}

template <class V, Of<ModelEntry> M>
constexpr void fields(V& v, M& m) {
  v.u32("model id", m.id);
  v.u32("max_batch", m.max_batch);
  v.i64("slo", m.slo_ns);
  v.str("model name", m.name, kMaxNameBytes);
  v.u32("priority_levels", m.priority_levels);
  v.u32("default_priority_level", m.default_priority_level);
  v.i64("least", m.least_ns);
}

template <class V, Of<Welcome> M>
constexpr void fields(V& v, M& m) {
  v.u32("peer_id", m.peer_id);
  const std::uint32_t n = v.count("model count", m.models);
  v.u64("incarnation", m.incarnation);
  v.u64("term", m.term);
  v.i64("heartbeat_interval", m.heartbeat_interval_ns);
  v.i64("heartbeat_timeout", m.heartbeat_timeout_ns);
  v.list("models", n, m.models, Bounds{kMaxModels}, [](auto& iv, auto& e) { fields(iv, e); });
}

template <class V, Of<Refuse> M>
constexpr void fields(V& v, M& m) {
  v.str("reason", m.reason, kMaxTextBytes);
  v.u64("term", m.term);
  v.u8("spare", m.spare);
  v.pad(3);
  v.str("primary", m.primary, kMaxNameBytes);
}

template <class V, Of<Goodbye> M>
constexpr void fields(V& v, M& m) {
  v.str("reason", m.reason, kMaxTextBytes);
}

template <class V, Of<CarriedRequest> M>
constexpr void fields(V& v, M& m) {
  v.u64("frontend_incarnation", m.frontend_incarnation);
  v.u64("request", m.request);
}

template <class V, Of<Calibration> M>
constexpr void fields(V& v, M& m) {
  v.u32("model", m.model);
  const std::uint32_t n = v.count("scale count", m.scales_e6);
  v.list("scales", n, m.scales_e6, Bounds{kMaxSizeClasses, true},
         [](auto& iv, auto& x) { iv.u32("scale", x); });
}

template <class V, Of<RepositoryModelState> M>
constexpr void fields(V& v, M& m) {
  v.u64("files", m.files);
  v.u8("served", m.served);
  v.u8("loading", m.loading);
  v.pad(2);
  v.str("model name", m.model, kMaxNameBytes);
}

template <class V, Of<Standing> M>
constexpr void fields(V& v, M& m) {
  v.u64("term", m.term);
  v.u8("primary", m.primary);
  v.pad(3);
  v.u32("index", m.index);
  v.i64("d_ctrl", m.d_ctrl_ns);
  v.i64("d_data", m.d_data_ns);
  v.i64("d_resp", m.d_resp_ns);
  v.u64("epoch", m.epoch);
  const std::uint32_t nb = v.count("backend count", m.backends);
  const std::uint32_t nm = v.count("model count", m.subclusters);
  const std::uint32_t nc = v.count("calibration count", m.calibrations);
  v.list("backends", nb, m.backends, Bounds{kMaxDevices}, [](auto& iv, auto& b) { iv.u64("backend", b); });
  v.list("sub-clusters", nm, m.subclusters, Bounds{kMaxModels},
         [](auto& iv, auto& s) { iv.u32("sub-cluster", s); });
  v.list("calibrations", nc, m.calibrations, Bounds{kMaxModels}, [](auto& iv, auto& c) { fields(iv, c); });
  const std::uint32_t nr = v.count("repository model count", m.repository);
  v.list("repository models", nr, m.repository, Bounds{kMaxModels}, [](auto& iv, auto& r) { fields(iv, r); });
}

template <class V, Of<Register> M>
constexpr void fields(V& v, M& m) {
  const std::uint32_t nd = v.count("device count", m.devices);
  const std::uint32_t nm = v.count("model count", m.models);
  const std::uint32_t nc = v.count("carried count", m.carried);
  const std::uint32_t nb = v.count("busy count", m.busy_ns);
  v.list("devices", nd, m.devices, Bounds{kMaxDevices, true},
         [](auto& iv, auto& s) { iv.str("device name", s, kMaxNameBytes); });
  v.list("models", nm, m.models, Bounds{kMaxModels},
         [](auto& iv, auto& s) { iv.str("model name", s, kMaxNameBytes); });
  v.list("carried requests", nc, m.carried, Bounds{kMaxEntries}, [](auto& iv, auto& e) { fields(iv, e); });
  v.list("busy times", nb, m.busy_ns, Bounds{kMaxDevices}, [](auto& iv, auto& t) { iv.i64("busy", t); });
}

template <class V, Of<Registered> M>
constexpr void fields(V& v, M& m) {
  const std::uint32_t n = v.count("gpu count", m.gpus);
  v.list("GPU ids", n, m.gpus, Bounds{kMaxDevices}, [](auto& iv, auto& g) { iv.u32("gpu", g); });
}

template <class V, Of<FrontendJoined> M>
constexpr void fields(V& v, M& m) {
  v.u32("frontend_id", m.frontend_id);
  v.u32("generation", m.generation);
  v.u64("incarnation", m.incarnation);
  v.str("address", m.address, kMaxNameBytes);
}

template <class V, Of<FrontendLeft> M>
constexpr void fields(V& v, M& m) {
  v.u32("frontend_id", m.frontend_id);
  v.u32("generation", m.generation);
}

template <class V, Of<PoolInfo> M>
constexpr void fields(V& v, M& m) {
  v.u64("base", m.base);
  v.u64("length", m.length);
  const std::uint32_t n = v.count("rkey length", m.rkey);
  v.list("rkey bytes", n, m.rkey, Bounds{static_cast<std::uint32_t>(kMaxRkeyBytes), true},
         [](auto& iv, auto& b) { iv.u8("rkey byte", b); });
  v.u32("index", m.index);
  v.u32("regions", m.regions);
}

template <class V, class M>
requires Of<M, PoolAck> || Of<M, PoolDrop>
constexpr void fields(V& v, M& m) { v.u32("index", m.index); }

template <class V, Of<Ping> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.i64("origin", m.origin_ns);
}

template <class V, Of<Pong> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.i64("origin", m.origin_ns);
  v.i64("reply_path", m.reply_path_ns);
}

template <class V, Of<BatchDone> M>
constexpr void fields(V& v, M& m) {
  v.u64("batch", m.batch);
  v.u8("status", m.status);
  v.pad(3);
  v.u32("executed", m.executed);
  v.i64("since_end", m.since_end_ns);
  v.i64("recv_to_end", m.recv_to_end_ns);
  v.i64("fetch", m.fetch_ns);
  v.i64("exec", m.exec_ns);
  v.i64("push", m.push_ns);
  v.str("error", m.error, kMaxTextBytes);
}

template <class V, Of<Placement> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.u32("device", m.device);
  const std::uint32_t nl = v.count("load count", m.load);
  const std::uint32_t nu = v.count("unload count", m.unload);
  v.list("models to load", nl, m.load, Bounds{kMaxModels}, [](auto& iv, auto& id) { iv.u32("model", id); });
  v.list("models to unload", nu, m.unload, Bounds{kMaxModels},
         [](auto& iv, auto& id) { iv.u32("model", id); });
}

template <class V, Of<PlacementDone> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.u32("device", m.device);
  v.u8("status", m.status);
  v.str("error", m.error, kMaxTextBytes);
}

template <class V, Of<Cancel> M>
constexpr void fields(V& v, M& m) {
  const std::uint32_t n = v.count("request count", m.requests);
  v.list("request ids", n, m.requests, Bounds{kMaxEntries, true},
         [](auto& iv, auto& id) { iv.u64("request id", id); });
}

template <class V, Of<StatsRequest> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
}

template <class V, Of<BatchSizeStats> M>
constexpr void fields(V& v, M& m) {
  v.u32("batch size", m.size);
  v.pad(4);
  v.u64("batches", m.count);
  v.i64("batch execution", m.exec_ns);
}

template <class V, Of<ModelStats> M>
constexpr void fields(V& v, M& m) {
  v.u32("model", m.model);
  const std::uint32_t n = v.count("batch size count", m.batches);
  v.u64("ok", m.ok);
  v.u64("late", m.late);
  v.u64("dropped", m.dropped);
  v.u64("errors", m.errors);
  v.i64("success", m.success_ns);
  v.i64("fail", m.fail_ns);
  v.i64("queue", m.queue_ns);
  v.i64("compute", m.compute_ns);
  v.i64("last_end", m.last_end_ms);
  v.list("batch sizes", n, m.batches, Bounds{kMaxEntries}, [](auto& iv, auto& b) { fields(iv, b); });
  v.i64("version", m.version);
  v.str("model name", m.name, kMaxNameBytes);
}

template <class V, Of<Stats> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  const std::uint32_t n = v.count("model count", m.models);
  v.list("models", n, m.models, Bounds{kMaxModels}, [](auto& iv, auto& x) { fields(iv, x); });
}

template <class V, Of<ModelControl> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.u8("op", m.op);
  v.pad(3);
  v.str("model name", m.model, kMaxNameBytes);
}

template <class V, Of<ModelControlDone> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.u8("code", m.code);
  v.pad(3);
  v.str("message", m.message, kMaxTextBytes);
}

template <class V, Of<UnservedModel> M>
constexpr void fields(V& v, M& m) {
  v.str("model name", m.name, kMaxNameBytes);
  v.str("reason", m.reason, kMaxTextBytes);
}

template <class V, Of<VersionNote> M>
constexpr void fields(V& v, M& m) {
  v.i64("version", m.version);
  v.str("model name", m.model, kMaxNameBytes);
  v.str("reason", m.reason, kMaxTextBytes);
}

template <class V, Of<ModelTable> M>
constexpr void fields(V& v, M& m) {
  const std::uint32_t n = v.count("model count", m.models);
  const std::uint32_t u = v.count("unserved count", m.unserved);
  const std::uint32_t k = v.count("note count", m.notes);
  v.list("models", n, m.models, Bounds{kMaxModels}, [](auto& iv, auto& e) { fields(iv, e); });
  v.list("unserved models", u, m.unserved, Bounds{kMaxModels}, [](auto& iv, auto& e) { fields(iv, e); });
  v.list("notes", k, m.notes, Bounds{kMaxModels}, [](auto& iv, auto& e) { fields(iv, e); });
}

template <class V, Of<ModelLoad> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.u32("model", m.model);
  v.u32("max batch", m.max_batch);
  v.i64("version", m.version);
  v.str("model name", m.name, kMaxNameBytes);
  v.str("repository model", m.repository_model, kMaxNameBytes);
  v.i64("run limit", m.run_limit_ns);
  v.str("tightest model", m.tightest, kMaxNameBytes);
}

template <class V, Of<ModelUnload> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.u32("model", m.model);
  v.str("model name", m.name, kMaxNameBytes);
}

template <class V, Of<LeaseRequest> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.u32("device", m.device);
  v.pad(4);
  v.i64("length", m.length_ns);
  v.i64("max wait", m.max_wait_ns);
}

template <class V, Of<LeaseGrant> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.u8("status", m.status);
  v.pad(3);
  v.str("error", m.error, kMaxTextBytes);
}

template <class V, Of<LeaseEnd> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.i64("ran", m.ran_ns);
}

template <class V, Of<AdmissionEntry> M>
constexpr void fields(V& v, M& m) {
  v.u32("model", m.model);
  v.u32("levels", m.levels);
  v.i64("work", m.work_ns);
  v.i64("per request", m.per_request_ns);
  v.i64("resp", m.resp_ns);
  v.i64("last left", m.last_left_ns);
  v.u32("share ppm", m.share_ppm);
}

template <class V, Of<Admission> M>
constexpr void fields(V& v, M& m) {
  const std::uint32_t n = v.count("model count", m.models);
  v.list("models", n, m.models, Bounds{kMaxModels}, [](auto& iv, auto& e) { fields(iv, e); });
}

template <class V, Of<ModelLoadDone> M>
constexpr void fields(V& v, M& m) {
  v.u64("seq", m.seq);
  v.u32("model", m.model);
  v.u8("status", m.status);
  v.pad(3);
  v.str("error", m.error, kMaxTextBytes);
}

template <class V, Of<SubmitEntry> M>
constexpr void fields(V& v, M& e) {
  v.u64("request", e.request);
  v.u64("addr", e.addr);
  v.u32("len", e.len);
  v.u32("model", e.model);
  v.i64("budget", e.budget_ns);
  v.u32("level", e.level);
  v.u32("waited_us", e.waited_us);
}

template <class V, Of<BatchEntry> M>
constexpr void fields(V& v, M& e) {
  v.u64("request", e.request);
  v.u64("addr", e.addr);
  v.u32("len", e.len);
  v.u32("frontend_id", e.frontend_id);
  v.u32("frontend_generation", e.frontend_generation);
  v.pad(4);
}

template <class V, Of<OutputEntry> M>
constexpr void fields(V& v, M& e) {
  v.u64("request", e.request);
  v.u32("len", e.len);
  v.pad(4);
}

template <class V, Of<OutcomeEntry> M>
constexpr void fields(V& v, M& e) {
  v.u64("request", e.request);
  v.u8("outcome", e.outcome);
  v.u8("reason", e.reason);
  v.pad(6);
}

template <class V, Of<SubmitView> M>
constexpr void fields(V& v, M& m) {
  const std::uint32_t n = v.count("count", m.entries);
  v.u32("flags", m.flags);
  v.entries("requests", n, m.entries, Bounds{kMaxEntries, true});
}

template <class V, Of<BatchView> M>
constexpr void fields(V& v, M& m) {
  v.u64("batch", m.batch);
  v.u32("device", m.device);
  v.u32("model", m.model);
  v.i64("predicted", m.predicted_ns);
  v.i64("exec_budget", m.exec_budget_ns);
  v.u32("planned_size", m.planned_size);
  const std::uint32_t n = v.count("count", m.entries);
  v.entries("requests", n, m.entries, Bounds{kMaxEntries, true});
}

template <class V, Of<OutputsView> M>
constexpr void fields(V& v, M& m) {
  v.u64("batch", m.batch);
  v.u32("batch_size", m.batch_size);
  const std::uint32_t n = v.count("count", m.entries);
  v.u8("status", m.status);
  v.pad(3);
  v.str("error", m.error, kMaxTextBytes);
  v.entries("outputs", n, m.entries, Bounds{kMaxEntries, true});
  v.payload("output payload", m.payload, m.entries);
}

template <class V, Of<OutcomesView> M>
constexpr void fields(V& v, M& m) {
  const std::uint32_t n = v.count("count", m.entries);
  v.str("text", m.text, kMaxTextBytes);
  v.entries("outcomes", n, m.entries, Bounds{kMaxEntries, true});
}

// The kind in the header of each message.
template <class M>
constexpr Kind kind_of = Kind{};
template <>
constexpr Kind kind_of<Hello> = Kind::kHello;
template <>
constexpr Kind kind_of<Welcome> = Kind::kWelcome;
template <>
constexpr Kind kind_of<Refuse> = Kind::kRefuse;
template <>
constexpr Kind kind_of<Register> = Kind::kRegister;
template <>
constexpr Kind kind_of<Registered> = Kind::kRegistered;
template <>
constexpr Kind kind_of<FrontendJoined> = Kind::kFrontendJoined;
template <>
constexpr Kind kind_of<FrontendLeft> = Kind::kFrontendLeft;
template <>
constexpr Kind kind_of<PoolInfo> = Kind::kPoolInfo;
template <>
constexpr Kind kind_of<PoolAck> = Kind::kPoolAck;
template <>
constexpr Kind kind_of<PoolDrop> = Kind::kPoolDrop;
template <>
constexpr Kind kind_of<SubmitView> = Kind::kSubmit;
template <>
constexpr Kind kind_of<BatchView> = Kind::kBatch;
template <>
constexpr Kind kind_of<BatchDone> = Kind::kBatchDone;
template <>
constexpr Kind kind_of<OutputsView> = Kind::kOutputs;
template <>
constexpr Kind kind_of<OutcomesView> = Kind::kOutcomes;
template <>
constexpr Kind kind_of<Ping> = Kind::kPing;
template <>
constexpr Kind kind_of<Pong> = Kind::kPong;
template <>
constexpr Kind kind_of<Goodbye> = Kind::kGoodbye;
template <>
constexpr Kind kind_of<Placement> = Kind::kPlacement;
template <>
constexpr Kind kind_of<PlacementDone> = Kind::kPlacementDone;
template <>
constexpr Kind kind_of<Cancel> = Kind::kCancel;
template <>
constexpr Kind kind_of<Standing> = Kind::kStanding;
template <>
constexpr Kind kind_of<StatsRequest> = Kind::kStatsRequest;
template <>
constexpr Kind kind_of<Stats> = Kind::kStats;
template <>
constexpr Kind kind_of<ModelControl> = Kind::kModelControl;
template <>
constexpr Kind kind_of<ModelControlDone> = Kind::kModelControlDone;
template <>
constexpr Kind kind_of<ModelTable> = Kind::kModelTable;
template <>
constexpr Kind kind_of<ModelLoad> = Kind::kModelLoad;
template <>
constexpr Kind kind_of<ModelLoadDone> = Kind::kModelLoadDone;
template <>
constexpr Kind kind_of<ModelUnload> = Kind::kModelUnload;
template <>
constexpr Kind kind_of<LeaseRequest> = Kind::kLeaseRequest;
template <>
constexpr Kind kind_of<LeaseGrant> = Kind::kLeaseGrant;
template <>
constexpr Kind kind_of<LeaseEnd> = Kind::kLeaseEnd;
template <>
constexpr Kind kind_of<Admission> = Kind::kAdmission;

// ---- visitors ---------------------------------------------------------------------

// Sizes a message (pos: its bytes) and finds where the field named `find`
// starts (at), for the offsets that the builders patch.
struct Measure : Widths<Measure> {
  static constexpr std::size_t kNone = ~std::size_t{0};
  constexpr explicit Measure(std::string_view field = {}) : find(field) {}

  template <std::size_t N, class T>
  constexpr void num(const char* name, T&) {
    mark(name);
    pos += N;
  }
  constexpr void pad(std::size_t n) { pos += n; }
  template <class S>
  constexpr void str(const char* name, S& s, std::size_t) {
    mark(name);
    pos += 4 + s.size();
  }
  template <class C>
  constexpr std::uint32_t count(const char* name, C& c) {
    mark(name);
    pos += 4;
    return static_cast<std::uint32_t>(c.size());
  }
  template <class C, class Item>
  constexpr void list(const char*, std::uint32_t, C& items, Bounds, Item item) {
    for (auto& x : items) item(*this, x);
  }
  template <class View>
  constexpr void entries(const char*, std::uint32_t, View& v, Bounds) {
    pos += v.bytes().size();
  }
  template <class P, class View>
  constexpr void payload(const char*, P& p, View&) {
    pos += p.size();
  }

  std::string_view find;
  std::size_t pos = 0;
  std::size_t at = kNone;

 private:
  constexpr void mark(const char* name) {
    if (!find.empty() && at == kNone && find == name) at = pos;  // sizing alone compares nothing
  }
};

// The bytes of a message with a fixed size (a header, an entry, the head of
// a hot message before its entries).
template <class M>
consteval std::size_t fixed_bytes() {
  M m{};
  Measure size;
  fields(size, m);
  return size.pos;
}

// Where the field `name` of M starts, from M's description; a name that is
// not there does not compile.
template <class M>
consteval std::size_t offset_of(std::string_view name) {
  M m{};
  Measure find(name);
  fields(find, m);
  if (find.at == Measure::kNone) throw "no field of that name in the description";
  return find.at;
}

// The sizes that wire.hpp publishes must be the descriptions'.
static_assert(fixed_bytes<Header>() == kHeaderBytes);
static_assert(fixed_bytes<SubmitEntry>() == kSubmitEntryBytes);
static_assert(fixed_bytes<BatchEntry>() == kBatchEntryBytes);
static_assert(fixed_bytes<OutputEntry>() == kOutputEntryBytes);
static_assert(fixed_bytes<OutcomeEntry>() == kOutcomeEntryBytes);

// Writes a message at `out`, into bytes that Measure has sized.
class Put : public Widths<Put> {
 public:
  explicit Put(std::uint8_t* out) : out_(out) {}

  template <std::size_t N, class T>
  void num(const char*, const T& x) {
    store_le<N>(out_ + pos_, to_bits<N>(x));
    pos_ += N;
  }
  void pad(std::size_t n) {
    std::memset(out_ + pos_, 0, n);
    pos_ += n;
  }
  template <class S>
  void str(const char*, const S& s, std::size_t) {
    store_le<4>(out_ + pos_, s.size());
    pos_ += 4;
    raw(s.data(), s.size());
  }
  template <class C>
  std::uint32_t count(const char*, const C& c) {
    const auto n = static_cast<std::uint32_t>(c.size());
    store_le<4>(out_ + pos_, n);
    pos_ += 4;
    return n;
  }
  template <class C, class Item>
  void list(const char*, std::uint32_t, const C& items, Bounds, Item item) {
    for (const auto& x : items) item(*this, x);
  }
  template <class View>
  void entries(const char*, std::uint32_t, const View& v, Bounds) {
    raw(v.bytes().data(), v.bytes().size());
  }
  template <class View>
  void payload(const char*, std::span<const std::uint8_t> p, const View&) {
    raw(p.data(), p.size());
  }

 private:
  void raw(const void* p, std::size_t n) {
    if (n != 0) std::memcpy(out_ + pos_, p, n);  // p may be null when n is 0
    pos_ += n;
  }

  std::uint8_t* out_;
  std::size_t pos_ = 0;
};

// Reads fixed-size fields at `in` without checks: the entries of a message
// whose bounds the Reader has checked, a header known to be long enough.
class At : public Widths<At> {
 public:
  explicit At(const std::uint8_t* in) : in_(in) {}
  template <std::size_t N, class T>
  void num(const char*, T& x) {
    x = from_bits<N, T>(load_le<N>(in_ + pos_));
    pos_ += N;
  }
  void pad(std::size_t n) { pos_ += n; }

 private:
  const std::uint8_t* in_;
  std::size_t pos_ = 0;
};

Status bad(Kind k, const std::string& what) {
  return Status(Errc::kInvalidArgument, "bad " + std::string(to_string(k)) + " message: " + what);
}

// Decodes a message body with bounds checks; the first failure sticks and
// names the field. Every count is checked against its bounds and against
// the bytes left (in 64-bit arithmetic: count <= 2^32 and an item's size is
// small, so the product cannot overflow) before anything is allocated.
class Reader : public Widths<Reader> {
 public:
  Reader(std::span<const std::uint8_t> msg, Kind kind)
      : p_(msg.data()), end_(msg.size()), pos_(kHeaderBytes), kind_(kind) {}

  bool ok() const noexcept { return error_.empty(); }

  template <std::size_t N, class T>
  void num(const char* field, T& x) {
    if (!need(N, field)) return;
    x = from_bits<N, T>(load_le<N>(p_ + pos_));
    pos_ += N;
  }
  void pad(std::size_t n) {
    if (need(n, "padding")) pos_ += n;
  }
  // A u32 length (at most `limit`) and that many bytes, copied into a
  // std::string or viewed in place by a std::string_view.
  template <class S>
  void str(const char* field, S& s, std::size_t limit) {
    std::uint32_t n = 0;
    num<4>(field, n);
    if (!ok()) return;
    if (n > limit) {
      fail(std::string(field) + " is " + std::to_string(n) + " bytes, more than the limit " +
           std::to_string(limit));
      return;
    }
    if (!need(n, field)) return;
    s = S(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
  }
  template <class C>
  std::uint32_t count(const char* field, C&) {
    std::uint32_t n = 0;
    num<4>(field, n);
    return n;
  }
  template <class T, class Item>
  void list(const char* what, std::uint32_t n, std::vector<T>& out, Bounds b, Item item) {
    T probe{};
    Measure least;  // the bytes of the smallest item
    item(least, probe);
    if (!counted(what, n, b, least.pos, std::is_arithmetic_v<T>)) return;
    out.resize(n);
    for (T& x : out) {
      if (!ok()) return;
      item(*this, x);
    }
  }
  template <class View>
  void entries(const char* what, std::uint32_t n, View& v, Bounds b) {
    if (!counted(what, n, b, View::kBytes, true)) return;
    v = View(p_ + pos_, n);
    pos_ += std::size_t{n} * View::kBytes;
  }
  // The bytes of every entry's len, after the entries.
  template <class View>
  void payload(const char* what, std::span<const std::uint8_t>& p, const View& entries) {
    if (!ok()) return;
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < entries.size(); ++i) total += entries[i].len;
    if (total > end_ - pos_) {
      fail(std::string(what) + ": " + std::to_string(total) + " bytes announced, only " +
           std::to_string(end_ - pos_) + " remain");
      return;
    }
    p = std::span<const std::uint8_t>(p_ + pos_, static_cast<std::size_t>(total));
    pos_ += static_cast<std::size_t>(total);
  }

  void fail(std::string what) {
    if (error_.empty()) error_ = std::move(what);
  }

  // The final verdict: every byte consumed, nothing failed.
  Status finish() {
    if (ok() && pos_ != end_) fail(std::to_string(end_ - pos_) + " trailing bytes after the body");
    if (!ok()) return bad(kind_, error_);
    return {};
  }

 private:
  bool need(std::size_t n, const char* field) {
    if (!ok()) return false;
    if (end_ - pos_ < n) {
      fail("truncated at " + std::string(field) + " (offset " + std::to_string(pos_) + ", " +
           std::to_string(n) + " bytes needed, " + std::to_string(end_ - pos_) + " left)");
      return false;
    }
    return true;
  }

  // Whether n items of at least `item_bytes` each (exactly, if `exact`) are
  // within bounds and fit in what is left.
  bool counted(const char* what, std::uint32_t n, Bounds b, std::size_t item_bytes, bool exact) {
    if (!ok()) return false;
    if (b.nonempty && n == 0) {
      fail(std::string("no ") + what);
      return false;
    }
    if (n > b.max) {
      fail(std::to_string(n) + " " + what + ", more than the limit " + std::to_string(b.max));
      return false;
    }
    const std::uint64_t bytes = std::uint64_t{n} * item_bytes;
    if (bytes > end_ - pos_) {
      fail(std::to_string(n) + " " + what + " need " + (exact ? "" : "at least ") + std::to_string(bytes) +
           " bytes, only " + std::to_string(end_ - pos_) +
           " remain (truncated or a count that overflows the length)");
      return false;
    }
    return true;
  }

  const std::uint8_t* p_;
  std::size_t end_;
  std::size_t pos_;
  Kind kind_;
  std::string error_;
};

// ---- encoding and decoding through the descriptions ----------------------------------

// Appends the bytes of `m` to `buf`.
template <class M>
void append(std::vector<std::uint8_t>& buf, const M& m) {
  Measure size;
  fields(size, m);
  const std::size_t at = buf.size();
  buf.resize(at + size.pos);
  Put put(buf.data() + at);
  fields(put, m);
}

template <class M>
std::vector<std::uint8_t> encode_message(const M& m) {
  static_assert(kind_of<M> != Kind{}, "a message without a kind");
  Measure size;
  fields(size, m);
  std::vector<std::uint8_t> out(kHeaderBytes + size.pos);
  const Header h{kMagic, kVersion, kind_of<M>, static_cast<std::uint32_t>(out.size()), 0};
  Put put(out.data());
  fields(put, h);
  fields(put, m);
  return out;
}

// Decodes the header and checks that it is of kind `want`.
Status expect(std::span<const std::uint8_t> msg, Kind want) {
  SYMPHONY_ASSIGN_OR_RETURN(Header h, decode_header(msg));
  if (h.kind != want)
    return Status(Errc::kInvalidArgument, "expected a " + std::string(to_string(want)) + " message, got " +
                                              std::string(to_string(h.kind)));
  return {};
}

// The checks of a decoded message beyond its layout (ranges, relations
// between fields), by kind; most kinds have none.
template <class M>
void check(Reader&, const M&) {}

void check_status(Reader& r, BatchStatus s, const char* what) {
  if (static_cast<std::uint8_t>(s) > 1)
    r.fail(std::string("unknown ") + what + " " + std::to_string(static_cast<std::uint8_t>(s)));
}

void check(Reader& r, const Hello& m) {
  const auto role = static_cast<std::uint8_t>(m.role);
  if (role < 1 || role > 3) r.fail("unknown role " + std::to_string(role));
}

void check(Reader& r, const ModelEntry& e) {
  if (e.slo_ns <= 0 || e.max_batch == 0)
    return r.fail("model '" + e.name + "' has a non-positive SLO or max_batch");
  if (e.default_priority_level > e.priority_levels)
    return r.fail("model '" + e.name + "' has default_priority_level " +
                  std::to_string(e.default_priority_level) + " beyond its priority_levels " +
                  std::to_string(e.priority_levels));
  if (e.least_ns < 0 || e.least_ns > kMaxDurationNs)
    return r.fail("model '" + e.name + "' has a least budget negative or longer than an hour: " +
                  std::to_string(e.least_ns) + " ns");
}

void check(Reader& r, const Welcome& m) {
  if (m.heartbeat_interval_ns <= 0 || m.heartbeat_timeout_ns <= 0)
    return r.fail("heartbeat interval and timeout must be positive");
  for (const ModelEntry& e : m.models) check(r, e);
}

void check(Reader& r, const Register& m) {
  if (!m.busy_ns.empty() && m.busy_ns.size() != m.devices.size())
    return r.fail(std::to_string(m.busy_ns.size()) + " busy times for " + std::to_string(m.devices.size()) +
                  " devices");
  for (std::int64_t t : m.busy_ns)
    if (t < 0 || t > kMaxDurationNs)
      return r.fail("a busy time is negative or longer than an hour: " + std::to_string(t) + " ns");
}

void check(Reader& r, const SubmitView& v) {
  if ((v.flags & ~kSubmitResubmitted) != 0) r.fail("unknown Submit flags " + std::to_string(v.flags));
}

void check(Reader& r, const Standing& m) {
  for (std::int64_t d : {m.d_ctrl_ns, m.d_data_ns, m.d_resp_ns})
    if (d < 0 || d > kMaxDurationNs)
      return r.fail("a delay is negative or longer than an hour: " + std::to_string(d) + " ns");
  for (const Calibration& c : m.calibrations)
    for (std::uint32_t s : c.scales_e6)
      if (s == 0) return r.fail("model " + std::to_string(c.model) + "'s calibration has a zero factor");
}

void check(Reader& r, const Stats& m) {
  for (const ModelStats& s : m.models) {
    for (std::int64_t t : {s.success_ns, s.fail_ns, s.queue_ns, s.compute_ns, s.last_end_ms})
      if (t < 0)
        return r.fail("model " + std::to_string(s.model) + " has a negative time: " + std::to_string(t));
    std::uint32_t last = 0;
    for (const BatchSizeStats& b : s.batches) {
      if (b.size <= last)
        return r.fail("model " + std::to_string(s.model) + "'s batch sizes are not ascending from 1 (" +
                      std::to_string(b.size) + " after " + std::to_string(last) + ")");
      if (b.exec_ns < 0)
        return r.fail("model " + std::to_string(s.model) + " has a negative execution time for batch size " +
                      std::to_string(b.size));
      last = b.size;
    }
  }
}

void check(Reader& r, const ModelControl& m) {
  if (m.op != ModelOp::kLoad && m.op != ModelOp::kUnload)
    return r.fail("model control op " + std::to_string(static_cast<int>(m.op)) + " (1 load, 2 unload)");
  if (m.model.empty()) r.fail("model control names no model");
}

void check(Reader& r, const ModelTable& m) {
  for (const ModelEntry& e : m.models) check(r, e);
  for (const UnservedModel& u : m.unserved)
    if (u.name.empty()) return r.fail("an unserved model without a name");
  for (const VersionNote& n : m.notes)
    if (n.model.empty() || n.version < 0) return r.fail("a version note without a model or a version");
}

void check(Reader& r, const ModelLoad& m) {
  if (m.name.empty() || m.repository_model.empty()) return r.fail("a model load names no model");
  if (m.version < 0) return r.fail("a model load of version " + std::to_string(m.version));
  if (m.run_limit_ns < -1 || m.run_limit_ns > kMaxDurationNs)
    return r.fail("a model load's run limit of " + std::to_string(m.run_limit_ns) + " ns");
  if (m.run_limit_ns >= 0 && m.tightest.empty()) r.fail("a model load's run limit names no served model");
}

void check(Reader& r, const ModelLoadDone& m) { check_status(r, m.status, "status"); }

void check(Reader& r, const ModelUnload& m) {
  if (m.name.empty()) r.fail("a model unload names no model");
}

void check(Reader& r, const LeaseRequest& m) {
  if (m.length_ns < -1) return r.fail("a lease of length " + std::to_string(m.length_ns));
  if (m.max_wait_ns < 0) r.fail("a lease that waits " + std::to_string(m.max_wait_ns));
}

void check(Reader& r, const LeaseGrant& m) { check_status(r, m.status, "status"); }

void check(Reader& r, const LeaseEnd& m) {
  if (m.ran_ns < 0) r.fail("a leased run of " + std::to_string(m.ran_ns) + " ns");
}

void check(Reader& r, const Admission& m) {
  for (const AdmissionEntry& e : m.models) {
    if (e.levels == 0)
      return r.fail("an admission test of model " + std::to_string(e.model) + " with no level");
    for (std::int64_t v : {e.work_ns, e.per_request_ns, e.resp_ns})
      if (v < 0 || v > kMaxDurationNs)
        return r.fail("an admission duration is negative or longer than an hour: " + std::to_string(v) +
                      " ns");
    if (e.last_left_ns < -kMaxDurationNs || e.last_left_ns > kMaxDurationNs)
      return r.fail(
          "an admission's last target is more than an hour away: " + std::to_string(e.last_left_ns) + " ns");
    if (e.share_ppm == 0 || e.share_ppm > 1'000'000)
      return r.fail("an admission's backlog share is " + std::to_string(e.share_ppm) +
                    " millionths; it must be in [1, 1000000]");
  }
}

void check(Reader& r, const FrontendJoined& m) {
  if (m.address.empty()) r.fail("empty frontend address");
}

void check(Reader& r, const PoolInfo& m) {
  if (m.length > std::numeric_limits<std::uint64_t>::max() - m.base) r.fail("the pool wraps around");
  if (m.index >= m.regions || m.regions > kMaxPoolRegions)
    r.fail("region " + std::to_string(m.index) + " of " + std::to_string(m.regions) + " (at most " +
           std::to_string(kMaxPoolRegions) + ")");
}

void check(Reader& r, const BatchDone& m) {
  check_status(r, m.status, "batch status");
  for (std::int64_t v : {m.since_end_ns, m.recv_to_end_ns, m.fetch_ns, m.exec_ns, m.push_ns})
    if (v < 0 || v > kMaxDurationNs)
      return r.fail("a timing is negative or longer than an hour: " + std::to_string(v) + " ns");
}

void check(Reader& r, const Placement& m) {
  if (m.device >= kMaxDevices)
    r.fail("device " + std::to_string(m.device) + " (below " + std::to_string(kMaxDevices) + " allowed)");
}

void check(Reader& r, const PlacementDone& m) { check_status(r, m.status, "status"); }

void check(Reader& r, const BatchView& v) {
  if (v.entries.size() > v.planned_size)
    return r.fail(std::to_string(v.entries.size()) + " requests in a batch planned for " +
                  std::to_string(v.planned_size));
  if (v.predicted_ns < 0 || v.predicted_ns > kMaxDurationNs)
    r.fail("predicted run time " + std::to_string(v.predicted_ns) + " ns is out of range");
}

void check(Reader& r, const OutputsView& v) { check_status(r, v.status, "batch status"); }

void check(Reader& r, const OutcomesView& v) {
  for (std::uint32_t i = 0; i < v.entries.size(); ++i) {
    const OutcomeEntry e = v.entries[i];
    const bool drop = e.outcome == static_cast<std::uint8_t>(Outcome::kDropped);
    const bool err = e.outcome == static_cast<std::uint8_t>(Outcome::kError);
    if (!drop && !err)
      return r.fail("outcome " + std::to_string(e.outcome) + " is neither dropped nor error");
    if (drop && (e.reason == 0 || e.reason >= kNumDropReasons))
      return r.fail("unknown drop reason " + std::to_string(e.reason));
  }
}

template <class M>
Result<M> decode_message(std::span<const std::uint8_t> msg) {
  static_assert(kind_of<M> != Kind{}, "a message without a kind");
  SYMPHONY_RETURN_IF_ERROR(expect(msg, kind_of<M>));
  Reader r(msg, kind_of<M>);
  M m;
  fields(r, m);
  if (r.ok()) check(r, m);
  SYMPHONY_RETURN_IF_ERROR(r.finish());
  return m;
}

template <class E>
E read_entry(const std::uint8_t* p) noexcept {
  E e;
  At at(p);
  fields(at, e);
  return e;
}

// A hot message is built in place: its header and head, then its entries
// appended one by one; sealing writes the entry count and the length at the
// offsets that the descriptions give them.
template <class Head>
void start(std::vector<std::uint8_t>& buf, const Head& head, std::size_t entry_bytes) {
  buf.reserve(kHeaderBytes + fixed_bytes<Head>() + entry_bytes);
  const Header h{kMagic, kVersion, kind_of<Head>, 0, 0};
  append(buf, h);
  append(buf, head);
}

template <class Head>
std::vector<std::uint8_t> seal(std::vector<std::uint8_t>& buf, std::uint32_t count) {
  store_le<4>(buf.data() + kHeaderBytes + offset_of<Head>("count"), count);
  store_le<4>(buf.data() + offset_of<Header>("length"), buf.size());
  return std::move(buf);
}

}  // namespace

std::string_view to_string(Kind k) noexcept {
  switch (k) {
    case Kind::kHello:
      return "Hello";
    case Kind::kWelcome:
      return "Welcome";
    case Kind::kRefuse:
      return "Refuse";
    case Kind::kRegister:
      return "Register";
    case Kind::kRegistered:
      return "Registered";
    case Kind::kFrontendJoined:
      return "FrontendJoined";
    case Kind::kFrontendLeft:
      return "FrontendLeft";
    case Kind::kPoolInfo:
      return "PoolInfo";
    case Kind::kPoolAck:
      return "PoolAck";
    case Kind::kPoolDrop:
      return "PoolDrop";
    case Kind::kSubmit:
      return "Submit";
    case Kind::kBatch:
      return "Batch";
    case Kind::kBatchDone:
      return "BatchDone";
    case Kind::kOutputs:
      return "Outputs";
    case Kind::kOutcomes:
      return "Outcomes";
    case Kind::kPing:
      return "Ping";
    case Kind::kPong:
      return "Pong";
    case Kind::kGoodbye:
      return "Goodbye";
    case Kind::kPlacement:
      return "Placement";
    case Kind::kPlacementDone:
      return "PlacementDone";
    case Kind::kCancel:
      return "Cancel";
    case Kind::kStanding:
      return "Standing";
    case Kind::kStatsRequest:
      return "StatsRequest";
    case Kind::kStats:
      return "Stats";
    case Kind::kModelControl:
      return "ModelControl";
    case Kind::kModelControlDone:
      return "ModelControlDone";
    case Kind::kModelTable:
      return "ModelTable";
    case Kind::kModelLoad:
      return "ModelLoad";
    case Kind::kModelLoadDone:
      return "ModelLoadDone";
    case Kind::kModelUnload:
      return "ModelUnload";
    case Kind::kLeaseRequest:
      return "LeaseRequest";
    case Kind::kLeaseGrant:
      return "LeaseGrant";
    case Kind::kLeaseEnd:
      return "LeaseEnd";
    case Kind::kAdmission:
      return "Admission";
  }
  return "?";
}

std::string_view to_string(Role r) noexcept {
  switch (r) {
    case Role::kFrontend:
      return "frontend";
    case Role::kBackend:
      return "backend";
    case Role::kScheduler:
      return "scheduler";
  }
  return "?";
}

// ---- entries ----------------------------------------------------------------------

SubmitEntry read_submit_entry(const std::uint8_t* p) noexcept { return read_entry<SubmitEntry>(p); }
BatchEntry read_batch_entry(const std::uint8_t* p) noexcept { return read_entry<BatchEntry>(p); }
OutputEntry read_output_entry(const std::uint8_t* p) noexcept { return read_entry<OutputEntry>(p); }
OutcomeEntry read_outcome_entry(const std::uint8_t* p) noexcept { return read_entry<OutcomeEntry>(p); }

// ---- encoders ---------------------------------------------------------------------

std::vector<std::uint8_t> encode(const Hello& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Welcome& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Refuse& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Register& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Registered& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const FrontendJoined& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const FrontendLeft& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const PoolInfo& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const PoolAck& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const PoolDrop& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Ping& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Pong& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Goodbye& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const BatchDone& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Placement& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const PlacementDone& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Cancel& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Standing& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const StatsRequest& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Stats& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const ModelControl& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const ModelControlDone& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const ModelTable& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const ModelLoad& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const ModelLoadDone& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const ModelUnload& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const LeaseRequest& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const LeaseGrant& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const LeaseEnd& m) { return encode_message(m); }
std::vector<std::uint8_t> encode(const Admission& m) { return encode_message(m); }

SubmitBuilder::SubmitBuilder(std::size_t reserve_entries, std::uint32_t flags) {
  start(buf_, SubmitView{flags, {}}, reserve_entries * kSubmitEntryBytes);
}
void SubmitBuilder::add(const SubmitEntry& e) {
  append(buf_, e);
  ++count_;
}
std::vector<std::uint8_t> SubmitBuilder::finish() && { return seal<SubmitView>(buf_, count_); }

BatchBuilder::BatchBuilder(std::uint64_t batch, std::uint32_t device, std::uint32_t model,
                           std::int64_t predicted_ns, std::int64_t exec_budget_ns,
                           std::uint32_t planned_size) {
  const BatchView head{batch, device, model, predicted_ns, exec_budget_ns, planned_size, {}};
  // Room for the planned entries, but no more than a Batch may carry.
  start(buf_, head, std::size_t{std::min(planned_size, kMaxEntries)} * kBatchEntryBytes);
}
void BatchBuilder::add(const BatchEntry& e) {
  append(buf_, e);
  ++count_;
}
std::vector<std::uint8_t> BatchBuilder::finish() && { return seal<BatchView>(buf_, count_); }

OutputsBuilder::OutputsBuilder(std::uint64_t batch, std::uint32_t batch_size, BatchStatus status,
                               std::string_view error)
    : batch_(batch), batch_size_(batch_size), status_(status), error_(error.substr(0, kMaxTextBytes)) {}
void OutputsBuilder::add(std::uint64_t request, std::span<const std::uint8_t> output) {
  append(entries_, OutputEntry{request, static_cast<std::uint32_t>(output.size())});
  payload_.insert(payload_.end(), output.begin(), output.end());
  ++count_;
}
std::vector<std::uint8_t> OutputsBuilder::finish() && {
  return encode_message(
      OutputsView{batch_, batch_size_, status_, error_, {entries_.data(), count_}, payload_});
}

OutcomesBuilder::OutcomesBuilder(std::string_view text) : text_(text.substr(0, kMaxTextBytes)) {}
void OutcomesBuilder::add(const OutcomeEntry& e) {
  append(entries_, e);
  ++count_;
}
std::vector<std::uint8_t> OutcomesBuilder::finish() && {
  return encode_message(OutcomesView{text_, {entries_.data(), count_}});
}

// ---- decoders ---------------------------------------------------------------------

Result<Header> decode_header(std::span<const std::uint8_t> msg) {
  if (msg.size() < kHeaderBytes)
    return Status(Errc::kInvalidArgument, "truncated message: " + std::to_string(msg.size()) +
                                              " bytes, shorter than the " + std::to_string(kHeaderBytes) +
                                              "-byte header");
  Header h;
  At at(msg.data());
  fields(at, h);
  if (h.magic != kMagic) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", h.magic);
    return Status(Errc::kInvalidArgument,
                  std::string("wrong magic ") + buf + " (not a Symphony cluster message)");
  }
  if (h.version != kVersion)
    return Status(Errc::kInvalidArgument, "unsupported protocol version " + std::to_string(h.version) +
                                              " (this build speaks version " + std::to_string(kVersion) +
                                              ")");
  const auto kind = static_cast<std::uint16_t>(h.kind);
  if (kind == 0 || kind > kMaxKind)
    return Status(Errc::kInvalidArgument, "unknown message kind " + std::to_string(kind));
  if (h.length > kMaxMessageBytes || msg.size() > kMaxMessageBytes)
    return Status(Errc::kInvalidArgument, "oversized " + std::string(to_string(h.kind)) + " message: " +
                                              std::to_string(std::max<std::size_t>(h.length, msg.size())) +
                                              " bytes, the limit is " + std::to_string(kMaxMessageBytes));
  if (h.length != msg.size())
    return Status(Errc::kInvalidArgument, std::string(h.length > msg.size() ? "truncated " : "overlong ") +
                                              std::string(to_string(h.kind)) + " message: the header says " +
                                              std::to_string(h.length) + " bytes, " +
                                              std::to_string(msg.size()) + " arrived");
  if (h.flags != 0)
    return Status(Errc::kInvalidArgument, "unknown flags " + std::to_string(h.flags) + " in a " +
                                              std::string(to_string(h.kind)) + " message");
  return h;
}

Result<Hello> decode_hello(std::span<const std::uint8_t> msg) { return decode_message<Hello>(msg); }
Result<Welcome> decode_welcome(std::span<const std::uint8_t> msg) { return decode_message<Welcome>(msg); }
Result<Refuse> decode_refuse(std::span<const std::uint8_t> msg) { return decode_message<Refuse>(msg); }
Result<Register> decode_register(std::span<const std::uint8_t> msg) { return decode_message<Register>(msg); }
Result<Registered> decode_registered(std::span<const std::uint8_t> msg) {
  return decode_message<Registered>(msg);
}
Result<FrontendJoined> decode_frontend_joined(std::span<const std::uint8_t> msg) {
  return decode_message<FrontendJoined>(msg);
}
Result<FrontendLeft> decode_frontend_left(std::span<const std::uint8_t> msg) {
  return decode_message<FrontendLeft>(msg);
}
Result<PoolInfo> decode_pool_info(std::span<const std::uint8_t> msg) { return decode_message<PoolInfo>(msg); }
Result<PoolAck> decode_pool_ack(std::span<const std::uint8_t> msg) { return decode_message<PoolAck>(msg); }
Result<PoolDrop> decode_pool_drop(std::span<const std::uint8_t> msg) { return decode_message<PoolDrop>(msg); }
Result<Ping> decode_ping(std::span<const std::uint8_t> msg) { return decode_message<Ping>(msg); }
Result<Pong> decode_pong(std::span<const std::uint8_t> msg) { return decode_message<Pong>(msg); }
Result<Goodbye> decode_goodbye(std::span<const std::uint8_t> msg) { return decode_message<Goodbye>(msg); }
Result<BatchDone> decode_batch_done(std::span<const std::uint8_t> msg) {
  return decode_message<BatchDone>(msg);
}
Result<Placement> decode_placement(std::span<const std::uint8_t> msg) {
  return decode_message<Placement>(msg);
}
Result<PlacementDone> decode_placement_done(std::span<const std::uint8_t> msg) {
  return decode_message<PlacementDone>(msg);
}
Result<Cancel> decode_cancel(std::span<const std::uint8_t> msg) { return decode_message<Cancel>(msg); }
Result<Standing> decode_standing(std::span<const std::uint8_t> msg) { return decode_message<Standing>(msg); }
Result<StatsRequest> decode_stats_request(std::span<const std::uint8_t> msg) {
  return decode_message<StatsRequest>(msg);
}
Result<Stats> decode_stats(std::span<const std::uint8_t> msg) { return decode_message<Stats>(msg); }
Result<ModelControl> decode_model_control(std::span<const std::uint8_t> msg) {
  return decode_message<ModelControl>(msg);
}
Result<ModelControlDone> decode_model_control_done(std::span<const std::uint8_t> msg) {
  return decode_message<ModelControlDone>(msg);
}
Result<ModelTable> decode_model_table(std::span<const std::uint8_t> msg) {
  return decode_message<ModelTable>(msg);
}
Result<ModelLoad> decode_model_load(std::span<const std::uint8_t> msg) {
  return decode_message<ModelLoad>(msg);
}
Result<ModelLoadDone> decode_model_load_done(std::span<const std::uint8_t> msg) {
  return decode_message<ModelLoadDone>(msg);
}
Result<ModelUnload> decode_model_unload(std::span<const std::uint8_t> msg) {
  return decode_message<ModelUnload>(msg);
}
Result<LeaseRequest> decode_lease_request(std::span<const std::uint8_t> msg) {
  return decode_message<LeaseRequest>(msg);
}
Result<LeaseGrant> decode_lease_grant(std::span<const std::uint8_t> msg) {
  return decode_message<LeaseGrant>(msg);
}
Result<LeaseEnd> decode_lease_end(std::span<const std::uint8_t> msg) { return decode_message<LeaseEnd>(msg); }
Result<Admission> decode_admission(std::span<const std::uint8_t> msg) {
  return decode_message<Admission>(msg);
}
Result<SubmitView> decode_submit(std::span<const std::uint8_t> msg) {
  return decode_message<SubmitView>(msg);
}
Result<BatchView> decode_batch(std::span<const std::uint8_t> msg) { return decode_message<BatchView>(msg); }
Result<OutputsView> decode_outputs(std::span<const std::uint8_t> msg) {
  return decode_message<OutputsView>(msg);
}
Result<OutcomesView> decode_outcomes(std::span<const std::uint8_t> msg) {
  return decode_message<OutcomesView>(msg);
}

Status validate(std::span<const std::uint8_t> msg) {
  SYMPHONY_ASSIGN_OR_RETURN(Header h, decode_header(msg));
  switch (h.kind) {
    case Kind::kHello:
      return decode_hello(msg).status();
    case Kind::kWelcome:
      return decode_welcome(msg).status();
    case Kind::kRefuse:
      return decode_refuse(msg).status();
    case Kind::kRegister:
      return decode_register(msg).status();
    case Kind::kRegistered:
      return decode_registered(msg).status();
    case Kind::kFrontendJoined:
      return decode_frontend_joined(msg).status();
    case Kind::kFrontendLeft:
      return decode_frontend_left(msg).status();
    case Kind::kPoolInfo:
      return decode_pool_info(msg).status();
    case Kind::kPoolAck:
      return decode_pool_ack(msg).status();
    case Kind::kPoolDrop:
      return decode_pool_drop(msg).status();
    case Kind::kSubmit:
      return decode_submit(msg).status();
    case Kind::kBatch:
      return decode_batch(msg).status();
    case Kind::kBatchDone:
      return decode_batch_done(msg).status();
    case Kind::kOutputs:
      return decode_outputs(msg).status();
    case Kind::kOutcomes:
      return decode_outcomes(msg).status();
    case Kind::kPing:
      return decode_ping(msg).status();
    case Kind::kPong:
      return decode_pong(msg).status();
    case Kind::kGoodbye:
      return decode_goodbye(msg).status();
    case Kind::kPlacement:
      return decode_placement(msg).status();
    case Kind::kPlacementDone:
      return decode_placement_done(msg).status();
    case Kind::kCancel:
      return decode_cancel(msg).status();
    case Kind::kStanding:
      return decode_standing(msg).status();
    case Kind::kStatsRequest:
      return decode_stats_request(msg).status();
    case Kind::kStats:
      return decode_stats(msg).status();
    case Kind::kModelControl:
      return decode_model_control(msg).status();
    case Kind::kModelControlDone:
      return decode_model_control_done(msg).status();
    case Kind::kModelTable:
      return decode_model_table(msg).status();
    case Kind::kModelLoad:
      return decode_model_load(msg).status();
    case Kind::kModelLoadDone:
      return decode_model_load_done(msg).status();
    case Kind::kModelUnload:
      return decode_model_unload(msg).status();
    case Kind::kLeaseRequest:
      return decode_lease_request(msg).status();
    case Kind::kLeaseGrant:
      return decode_lease_grant(msg).status();
    case Kind::kLeaseEnd:
      return decode_lease_end(msg).status();
    case Kind::kAdmission:
      return decode_admission(msg).status();
  }
  return Status(Errc::kInvalidArgument, "unknown message kind");
}

bool same_token(std::string_view got, std::string_view want) noexcept {
  if (got.size() != want.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < got.size(); ++i) diff |= static_cast<unsigned char>(got[i] ^ want[i]);
  return diff == 0;
}

}  // namespace symphony::cluster::wire
