// The cluster's wire protocol: encoders and the checking decoders (see
// wire.hpp for the layout and the rules).
#include "symphony/rdma/wire.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "symphony/types.hpp"

namespace symphony::rdma::wire {
namespace {

std::uint16_t load_u16(const std::uint8_t* p) noexcept {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
std::uint32_t load_u32(const std::uint8_t* p) noexcept {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) |
         (std::uint32_t{p[3]} << 24);
}
std::uint64_t load_u64(const std::uint8_t* p) noexcept {
  return std::uint64_t{load_u32(p)} | (std::uint64_t{load_u32(p + 4)} << 32);
}

Status bad(Kind k, const std::string& what) {
  return Status(Errc::kInvalidArgument, "bad " + std::string(to_string(k)) + " message: " + what);
}

// Reads a message body with bounds checks; the first failure sticks and
// names the field.
class Reader {
 public:
  Reader(std::span<const std::uint8_t> msg, Kind kind) : p_(msg.data()), end_(msg.size()), kind_(kind) {
    pos_ = kHeaderBytes;
  }

  bool ok() const noexcept { return error_.empty(); }
  std::size_t remaining() const noexcept { return ok() ? end_ - pos_ : 0; }
  std::size_t pos() const noexcept { return pos_; }
  const std::uint8_t* at(std::size_t off) const noexcept { return p_ + off; }

  std::uint8_t u8(const char* field) { return need(1, field) ? p_[pos_++] : 0; }
  std::uint16_t u16(const char* field) {
    if (!need(2, field)) return 0;
    const std::uint16_t v = load_u16(p_ + pos_);
    pos_ += 2;
    return v;
  }
  std::uint32_t u32(const char* field) {
    if (!need(4, field)) return 0;
    const std::uint32_t v = load_u32(p_ + pos_);
    pos_ += 4;
    return v;
  }
  std::uint64_t u64(const char* field) {
    if (!need(8, field)) return 0;
    const std::uint64_t v = load_u64(p_ + pos_);
    pos_ += 8;
    return v;
  }
  std::int64_t i64(const char* field) { return static_cast<std::int64_t>(u64(field)); }

  // A u32 length (at most `limit`) and that many bytes.
  std::string str(const char* field, std::size_t limit) {
    const std::uint32_t n = u32(field);
    if (!ok()) return {};
    if (n > limit) {
      fail(std::string(field) + " is " + std::to_string(n) + " bytes, more than the limit " +
           std::to_string(limit));
      return {};
    }
    if (!need(n, field)) return {};
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return s;
  }

  // Skips `count` entries of `size` bytes; returns where they start.
  // Checks the count against `limit` and the bytes left (no overflow:
  // count <= 2^32 and size is small, so the product fits in 64 bits).
  std::size_t entries(std::uint32_t count, std::size_t size, std::uint32_t limit, const char* what) {
    if (!ok()) return 0;
    if (count > limit) {
      fail(std::to_string(count) + " " + what + ", more than the limit " + std::to_string(limit));
      return 0;
    }
    const std::uint64_t need_bytes = std::uint64_t{count} * size;
    if (need_bytes > end_ - pos_) {
      fail(std::to_string(count) + " " + what + " need " + std::to_string(need_bytes) + " bytes, only " +
           std::to_string(end_ - pos_) + " remain (truncated or a count that overflows the length)");
      return 0;
    }
    const std::size_t start = pos_;
    pos_ += static_cast<std::size_t>(need_bytes);
    return start;
  }

  // Consumes `n` raw bytes; returns where they start.
  std::size_t skip(std::uint64_t n, const char* field) {
    if (!ok()) return 0;
    if (n > end_ - pos_) {
      fail(std::string(field) + ": " + std::to_string(n) + " bytes announced, only " +
           std::to_string(end_ - pos_) + " remain");
      return 0;
    }
    const std::size_t start = pos_;
    pos_ += static_cast<std::size_t>(n);
    return start;
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

  const std::uint8_t* p_;
  std::size_t end_;
  std::size_t pos_;
  Kind kind_;
  std::string error_;
};

// Decodes the header and checks that it is of kind `want`.
Status expect(std::span<const std::uint8_t> msg, Kind want) {
  Result<Header> h = decode_header(msg);
  if (!h.ok()) return h.status();
  if (h->kind != want)
    return Status(Errc::kInvalidArgument, "expected a " + std::string(to_string(want)) + " message, got " +
                                              std::string(to_string(h->kind)));
  return {};
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

SubmitEntry read_submit_entry(const std::uint8_t* p) noexcept {
  return {load_u64(p), load_u64(p + 8), load_u32(p + 16), load_u32(p + 20),
          static_cast<std::int64_t>(load_u64(p + 24))};
}
BatchEntry read_batch_entry(const std::uint8_t* p) noexcept {
  return {load_u64(p), load_u64(p + 8), load_u32(p + 16), load_u32(p + 20), load_u32(p + 24)};
}
OutputEntry read_output_entry(const std::uint8_t* p) noexcept { return {load_u64(p), load_u32(p + 8)}; }
OutcomeEntry read_outcome_entry(const std::uint8_t* p) noexcept { return {load_u64(p), p[8], p[9]}; }

// ---- Writer -----------------------------------------------------------------------

Writer::Writer(Kind kind, std::size_t reserve) {
  buf_.reserve(kHeaderBytes + reserve);
  u32(kMagic);
  u16(kVersion);
  u16(static_cast<std::uint16_t>(kind));
  u32(0);  // length: finish()
  u32(0);  // flags
}
Writer& Writer::u8(std::uint8_t v) {
  buf_.push_back(v);
  return *this;
}
Writer& Writer::u16(std::uint16_t v) {
  buf_.push_back(static_cast<std::uint8_t>(v));
  buf_.push_back(static_cast<std::uint8_t>(v >> 8));
  return *this;
}
Writer& Writer::u32(std::uint32_t v) {
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  return *this;
}
Writer& Writer::u64(std::uint64_t v) {
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  return *this;
}
Writer& Writer::bytes(const void* p, std::size_t n) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  buf_.insert(buf_.end(), b, b + n);
  return *this;
}
void Writer::patch_u32(std::size_t offset, std::uint32_t v) {
  for (int i = 0; i < 4; ++i)
    buf_[offset + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::vector<std::uint8_t> Writer::finish() && {
  patch_u32(8, static_cast<std::uint32_t>(buf_.size()));
  return std::move(buf_);
}

// ---- encoders ---------------------------------------------------------------------

std::vector<std::uint8_t> encode(const Hello& m) {
  Writer w(Kind::kHello, 32 + m.token.size() + m.name.size() + m.address.size());
  w.u8(static_cast<std::uint8_t>(m.role)).u8(0).u16(0).u32(m.pid).u64(m.incarnation);
  w.str(m.token).str(m.name).str(m.address);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const Welcome& m) {
  Writer w(Kind::kWelcome, 40 + m.models.size() * 48);
  w.u32(m.peer_id).u32(static_cast<std::uint32_t>(m.models.size())).u64(m.incarnation);
  w.i64(m.heartbeat_interval_ns).i64(m.heartbeat_timeout_ns);
  for (const ModelEntry& e : m.models) w.u32(e.id).u32(e.max_batch).i64(e.slo_ns).str(e.name);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const Refuse& m) {
  Writer w(Kind::kRefuse, 4 + m.reason.size());
  w.str(m.reason);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const Register& m) {
  Writer w(Kind::kRegister);
  w.u32(static_cast<std::uint32_t>(m.devices.size())).u32(static_cast<std::uint32_t>(m.models.size()));
  for (const std::string& d : m.devices) w.str(d);
  for (const std::string& s : m.models) w.str(s);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const Registered& m) {
  Writer w(Kind::kRegistered, 4 + 4 * m.gpus.size());
  w.u32(static_cast<std::uint32_t>(m.gpus.size()));
  for (std::uint32_t g : m.gpus) w.u32(g);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const FrontendJoined& m) {
  Writer w(Kind::kFrontendJoined, 20 + m.address.size());
  w.u32(m.frontend_id).u32(m.generation).u64(m.incarnation).str(m.address);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const FrontendLeft& m) {
  Writer w(Kind::kFrontendLeft, 8);
  w.u32(m.frontend_id).u32(m.generation);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const PoolInfo& m) {
  Writer w(Kind::kPoolInfo, 20 + m.rkey.size());
  w.u64(m.base)
      .u64(m.length)
      .u32(static_cast<std::uint32_t>(m.rkey.size()))
      .bytes(m.rkey.data(), m.rkey.size());
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const Ping& m) {
  Writer w(Kind::kPing, 16);
  w.u64(m.seq).i64(m.origin_ns);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const Pong& m) {
  Writer w(Kind::kPong, 16);
  w.u64(m.seq).i64(m.origin_ns);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const Goodbye& m) {
  Writer w(Kind::kGoodbye, 4 + m.reason.size());
  w.str(m.reason);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const BatchDone& m) {
  Writer w(Kind::kBatchDone, 64 + m.error.size());
  w.u64(m.batch).u8(static_cast<std::uint8_t>(m.status)).u8(0).u16(0).u32(m.executed);
  w.i64(m.since_end_ns).i64(m.recv_to_end_ns).i64(m.fetch_ns).i64(m.exec_ns).i64(m.push_ns);
  w.str(m.error);
  return std::move(w).finish();
}

SubmitBuilder::SubmitBuilder(std::size_t reserve_entries)
    : w_(Kind::kSubmit, 8 + reserve_entries * kSubmitEntryBytes) {
  w_.u32(0).u32(0);  // count (patched), reserved
}
void SubmitBuilder::add(const SubmitEntry& e) {
  w_.u64(e.request).u64(e.addr).u32(e.len).u32(e.model).i64(e.budget_ns);
  ++count_;
}
std::vector<std::uint8_t> SubmitBuilder::finish() && {
  w_.patch_u32(kHeaderBytes, count_);
  return std::move(w_).finish();
}

BatchBuilder::BatchBuilder(std::uint64_t batch, std::uint32_t device, std::uint32_t model,
                           std::int64_t predicted_ns, std::int64_t exec_budget_ns, std::uint32_t planned_size)
    : w_(Kind::kBatch, 48 + std::size_t{planned_size} * kBatchEntryBytes) {
  w_.u64(batch).u32(device).u32(model).i64(predicted_ns).i64(exec_budget_ns).u32(planned_size).u32(0);
}
void BatchBuilder::add(const BatchEntry& e) {
  w_.u64(e.request).u64(e.addr).u32(e.len).u32(e.frontend_id).u32(e.frontend_generation).u32(0);
  ++count_;
}
std::vector<std::uint8_t> BatchBuilder::finish() && {
  w_.patch_u32(kHeaderBytes + 36, count_);
  return std::move(w_).finish();
}

OutputsBuilder::OutputsBuilder(std::uint64_t batch, std::uint32_t batch_size, BatchStatus status,
                               std::string_view error)
    : batch_(batch), batch_size_(batch_size), status_(status), error_(error.substr(0, kMaxTextBytes)) {}
void OutputsBuilder::add(std::uint64_t request, std::span<const std::uint8_t> output) {
  entries_.push_back({request, static_cast<std::uint32_t>(output.size())});
  payload_.insert(payload_.end(), output.begin(), output.end());
}
std::vector<std::uint8_t> OutputsBuilder::finish() && {
  Writer w(Kind::kOutputs, 32 + entries_.size() * kOutputEntryBytes + error_.size() + payload_.size());
  w.u64(batch_).u32(batch_size_).u32(static_cast<std::uint32_t>(entries_.size()));
  w.u8(static_cast<std::uint8_t>(status_)).u8(0).u16(0).str(error_);
  for (const OutputEntry& e : entries_) w.u64(e.request).u32(e.len).u32(0);
  w.bytes(payload_.data(), payload_.size());
  return std::move(w).finish();
}

OutcomesBuilder::OutcomesBuilder(std::string_view text) : text_(text.substr(0, kMaxTextBytes)) {}
void OutcomesBuilder::add(const OutcomeEntry& e) {
  for (int i = 0; i < 8; ++i) entries_.push_back(static_cast<std::uint8_t>(e.request >> (8 * i)));
  entries_.push_back(e.outcome);
  entries_.push_back(e.reason);
  entries_.insert(entries_.end(), 6, 0);
  ++count_;
}
std::vector<std::uint8_t> OutcomesBuilder::finish() && {
  Writer w(Kind::kOutcomes, 8 + text_.size() + entries_.size());
  w.u32(count_).str(text_).bytes(entries_.data(), entries_.size());
  return std::move(w).finish();
}

// ---- decoders ---------------------------------------------------------------------

Result<Header> decode_header(std::span<const std::uint8_t> msg) {
  if (msg.size() < kHeaderBytes)
    return Status(Errc::kInvalidArgument, "truncated message: " + std::to_string(msg.size()) +
                                              " bytes, shorter than the " + std::to_string(kHeaderBytes) +
                                              "-byte header");
  Header h;
  h.magic = load_u32(msg.data());
  if (h.magic != kMagic) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", h.magic);
    return Status(Errc::kInvalidArgument,
                  std::string("wrong magic ") + buf + " (not a Symphony cluster message)");
  }
  h.version = load_u16(msg.data() + 4);
  if (h.version != kVersion)
    return Status(Errc::kInvalidArgument, "unsupported protocol version " + std::to_string(h.version) +
                                              " (this build speaks version " + std::to_string(kVersion) +
                                              ")");
  const std::uint16_t kind = load_u16(msg.data() + 6);
  if (kind == 0 || kind > kMaxKind)
    return Status(Errc::kInvalidArgument, "unknown message kind " + std::to_string(kind));
  h.kind = static_cast<Kind>(kind);
  h.length = load_u32(msg.data() + 8);
  if (h.length > kMaxMessageBytes || msg.size() > kMaxMessageBytes)
    return Status(Errc::kInvalidArgument, "oversized " + std::string(to_string(h.kind)) + " message: " +
                                              std::to_string(std::max<std::size_t>(h.length, msg.size())) +
                                              " bytes, the limit is " + std::to_string(kMaxMessageBytes));
  if (h.length != msg.size())
    return Status(Errc::kInvalidArgument, std::string(h.length > msg.size() ? "truncated " : "overlong ") +
                                              std::string(to_string(h.kind)) + " message: the header says " +
                                              std::to_string(h.length) + " bytes, " +
                                              std::to_string(msg.size()) + " arrived");
  h.flags = load_u32(msg.data() + 12);
  if (h.flags != 0)
    return Status(Errc::kInvalidArgument, "unknown flags " + std::to_string(h.flags) + " in a " +
                                              std::string(to_string(h.kind)) + " message");
  return h;
}

Result<Hello> decode_hello(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kHello); !s.ok()) return s;
  Reader r(msg, Kind::kHello);
  Hello m;
  const std::uint8_t role = r.u8("role");
  r.u8("pad");
  r.u16("pad");
  m.pid = r.u32("pid");
  m.incarnation = r.u64("incarnation");
  m.token = r.str("token", kMaxTokenBytes);
  m.name = r.str("name", kMaxNameBytes);
  m.address = r.str("address", kMaxNameBytes);
  if (r.ok() && (role < 1 || role > 3)) r.fail("unknown role " + std::to_string(role));
  m.role = static_cast<Role>(role);
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<Welcome> decode_welcome(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kWelcome); !s.ok()) return s;
  Reader r(msg, Kind::kWelcome);
  Welcome m;
  m.peer_id = r.u32("peer_id");
  const std::uint32_t n = r.u32("model count");
  m.incarnation = r.u64("incarnation");
  m.heartbeat_interval_ns = r.i64("heartbeat_interval");
  m.heartbeat_timeout_ns = r.i64("heartbeat_timeout");
  if (r.ok() && n > kMaxModels)
    r.fail(std::to_string(n) + " models, more than the limit " + std::to_string(kMaxModels));
  // Each entry takes at least 20 bytes: a count beyond the remaining bytes is refused before any allocation.
  if (r.ok() && std::uint64_t{n} * 20 > r.remaining())
    r.fail(std::to_string(n) + " models cannot fit in the " + std::to_string(r.remaining()) + " bytes left");
  if (r.ok() && (m.heartbeat_interval_ns <= 0 || m.heartbeat_timeout_ns <= 0))
    r.fail("heartbeat interval and timeout must be positive");
  for (std::uint32_t i = 0; r.ok() && i < n; ++i) {
    ModelEntry e;
    e.id = r.u32("model id");
    e.max_batch = r.u32("max_batch");
    e.slo_ns = r.i64("slo");
    e.name = r.str("model name", kMaxNameBytes);
    if (r.ok() && (e.slo_ns <= 0 || e.max_batch == 0))
      r.fail("model '" + e.name + "' has a non-positive SLO or max_batch");
    m.models.push_back(std::move(e));
  }
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<Refuse> decode_refuse(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kRefuse); !s.ok()) return s;
  Reader r(msg, Kind::kRefuse);
  Refuse m;
  m.reason = r.str("reason", kMaxTextBytes);
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<Register> decode_register(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kRegister); !s.ok()) return s;
  Reader r(msg, Kind::kRegister);
  Register m;
  const std::uint32_t nd = r.u32("device count");
  const std::uint32_t nm = r.u32("model count");
  if (r.ok() && (nd == 0 || nd > kMaxDevices))
    r.fail(std::to_string(nd) + " devices (1 to " + std::to_string(kMaxDevices) + " allowed)");
  if (r.ok() && nm > kMaxModels)
    r.fail(std::to_string(nm) + " models, more than the limit " + std::to_string(kMaxModels));
  if (r.ok() && (std::uint64_t{nd} + nm) * 4 > r.remaining())
    r.fail(std::to_string(nd) + " devices and " + std::to_string(nm) + " models cannot fit in the " +
           std::to_string(r.remaining()) + " bytes left");
  for (std::uint32_t i = 0; r.ok() && i < nd; ++i) m.devices.push_back(r.str("device name", kMaxNameBytes));
  for (std::uint32_t i = 0; r.ok() && i < nm; ++i) m.models.push_back(r.str("model name", kMaxNameBytes));
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<Registered> decode_registered(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kRegistered); !s.ok()) return s;
  Reader r(msg, Kind::kRegistered);
  Registered m;
  const std::uint32_t n = r.u32("gpu count");
  const std::size_t at = r.entries(n, 4, kMaxDevices, "GPU ids");
  for (std::uint32_t i = 0; r.ok() && i < n; ++i) m.gpus.push_back(load_u32(r.at(at + 4 * std::size_t{i})));
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<FrontendJoined> decode_frontend_joined(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kFrontendJoined); !s.ok()) return s;
  Reader r(msg, Kind::kFrontendJoined);
  FrontendJoined m;
  m.frontend_id = r.u32("frontend_id");
  m.generation = r.u32("generation");
  m.incarnation = r.u64("incarnation");
  m.address = r.str("address", kMaxNameBytes);
  if (r.ok() && m.address.empty()) r.fail("empty frontend address");
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<FrontendLeft> decode_frontend_left(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kFrontendLeft); !s.ok()) return s;
  Reader r(msg, Kind::kFrontendLeft);
  FrontendLeft m;
  m.frontend_id = r.u32("frontend_id");
  m.generation = r.u32("generation");
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<PoolInfo> decode_pool_info(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kPoolInfo); !s.ok()) return s;
  Reader r(msg, Kind::kPoolInfo);
  PoolInfo m;
  m.base = r.u64("base");
  m.length = r.u64("length");
  const std::uint32_t n = r.u32("rkey length");
  const std::size_t at = r.entries(n, 1, static_cast<std::uint32_t>(kMaxRkeyBytes), "rkey bytes");
  if (r.ok()) m.rkey.assign(r.at(at), r.at(at) + n);
  if (r.ok() && m.rkey.empty()) r.fail("empty rkey");
  if (r.ok() && m.length > std::numeric_limits<std::uint64_t>::max() - m.base)
    r.fail("the pool wraps around");
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<Ping> decode_ping(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kPing); !s.ok()) return s;
  Reader r(msg, Kind::kPing);
  Ping m;
  m.seq = r.u64("seq");
  m.origin_ns = r.i64("origin");
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<Pong> decode_pong(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kPong); !s.ok()) return s;
  Reader r(msg, Kind::kPong);
  Pong m;
  m.seq = r.u64("seq");
  m.origin_ns = r.i64("origin");
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<Goodbye> decode_goodbye(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kGoodbye); !s.ok()) return s;
  Reader r(msg, Kind::kGoodbye);
  Goodbye m;
  m.reason = r.str("reason", kMaxTextBytes);
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

std::vector<std::uint8_t> encode(const Placement& m) {
  Writer w(Kind::kPlacement, 20 + 4 * (m.load.size() + m.unload.size()));
  w.u64(m.seq).u32(m.device).u32(static_cast<std::uint32_t>(m.load.size()));
  w.u32(static_cast<std::uint32_t>(m.unload.size()));
  for (std::uint32_t x : m.load) w.u32(x);
  for (std::uint32_t x : m.unload) w.u32(x);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const PlacementDone& m) {
  Writer w(Kind::kPlacementDone, 20 + m.error.size());
  w.u64(m.seq).u32(m.device).u8(static_cast<std::uint8_t>(m.status)).str(m.error);
  return std::move(w).finish();
}

std::vector<std::uint8_t> encode(const Cancel& m) {
  Writer w(Kind::kCancel, 4 + 8 * m.requests.size());
  w.u32(static_cast<std::uint32_t>(m.requests.size()));
  for (std::uint64_t id : m.requests) w.u64(id);
  return std::move(w).finish();
}

Result<Cancel> decode_cancel(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kCancel); !s.ok()) return s;
  Reader r(msg, Kind::kCancel);
  Cancel m;
  const std::uint32_t n = r.u32("request count");
  const std::size_t at = r.entries(n, 8, kMaxEntries, "request ids");
  if (r.ok() && n == 0) r.fail("no request ids");
  for (std::uint32_t i = 0; r.ok() && i < n; ++i) m.requests.push_back(load_u64(r.at(at + 8 * std::size_t{i})));
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<Placement> decode_placement(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kPlacement); !s.ok()) return s;
  Reader r(msg, Kind::kPlacement);
  Placement m;
  m.seq = r.u64("seq");
  m.device = r.u32("device");
  const std::uint32_t nl = r.u32("load count");
  const std::uint32_t nu = r.u32("unload count");
  if (r.ok() && m.device >= kMaxDevices)
    r.fail("device " + std::to_string(m.device) + " (below " + std::to_string(kMaxDevices) + " allowed)");
  const std::size_t at = r.entries(nl, 4, kMaxModels, "models to load");
  for (std::uint32_t i = 0; r.ok() && i < nl; ++i) m.load.push_back(load_u32(r.at(at + 4 * std::size_t{i})));
  const std::size_t ut = r.entries(nu, 4, kMaxModels, "models to unload");
  for (std::uint32_t i = 0; r.ok() && i < nu; ++i)
    m.unload.push_back(load_u32(r.at(ut + 4 * std::size_t{i})));
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<PlacementDone> decode_placement_done(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kPlacementDone); !s.ok()) return s;
  Reader r(msg, Kind::kPlacementDone);
  PlacementDone m;
  m.seq = r.u64("seq");
  m.device = r.u32("device");
  const std::uint8_t st = r.u8("status");
  if (r.ok() && st > 1) r.fail("unknown status " + std::to_string(st));
  m.status = static_cast<BatchStatus>(st);
  m.error = r.str("error", kMaxTextBytes);
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<BatchDone> decode_batch_done(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kBatchDone); !s.ok()) return s;
  Reader r(msg, Kind::kBatchDone);
  BatchDone m;
  m.batch = r.u64("batch");
  const std::uint8_t st = r.u8("status");
  r.u8("pad");
  r.u16("pad");
  m.executed = r.u32("executed");
  m.since_end_ns = r.i64("since_end");
  m.recv_to_end_ns = r.i64("recv_to_end");
  m.fetch_ns = r.i64("fetch");
  m.exec_ns = r.i64("exec");
  m.push_ns = r.i64("push");
  m.error = r.str("error", kMaxTextBytes);
  if (r.ok() && st > 1) r.fail("unknown batch status " + std::to_string(st));
  m.status = static_cast<BatchStatus>(st);
  constexpr std::int64_t kHour = std::int64_t{3600} * 1000000000;
  for (std::int64_t v : {m.since_end_ns, m.recv_to_end_ns, m.fetch_ns, m.exec_ns, m.push_ns})
    if (r.ok() && (v < 0 || v > kHour))
      r.fail("a timing is negative or longer than an hour: " + std::to_string(v) + " ns");
  if (Status s = r.finish(); !s.ok()) return s;
  return m;
}

Result<SubmitView> decode_submit(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kSubmit); !s.ok()) return s;
  Reader r(msg, Kind::kSubmit);
  const std::uint32_t n = r.u32("count");
  r.u32("reserved");
  const std::size_t at = r.entries(n, kSubmitEntryBytes, kMaxEntries, "requests");
  if (r.ok() && n == 0) r.fail("no requests");
  if (Status s = r.finish(); !s.ok()) return s;
  return SubmitView{{r.at(at), n}};
}

Result<BatchView> decode_batch(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kBatch); !s.ok()) return s;
  Reader r(msg, Kind::kBatch);
  BatchView v;
  v.batch = r.u64("batch");
  v.device = r.u32("device");
  v.model = r.u32("model");
  v.predicted_ns = r.i64("predicted");
  v.exec_budget_ns = r.i64("exec_budget");
  v.planned_size = r.u32("planned_size");
  const std::uint32_t n = r.u32("count");
  const std::size_t at = r.entries(n, kBatchEntryBytes, kMaxEntries, "requests");
  if (r.ok() && n == 0) r.fail("no requests");
  if (r.ok() && n > v.planned_size)
    r.fail(std::to_string(n) + " requests in a batch planned for " + std::to_string(v.planned_size));
  if (r.ok() && (v.predicted_ns < 0 || v.predicted_ns > std::int64_t{3600} * 1000000000))
    r.fail("predicted run time " + std::to_string(v.predicted_ns) + " ns is out of range");
  if (Status s = r.finish(); !s.ok()) return s;
  v.entries = {r.at(at), n};
  return v;
}

Result<OutputsView> decode_outputs(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kOutputs); !s.ok()) return s;
  Reader r(msg, Kind::kOutputs);
  OutputsView v;
  v.batch = r.u64("batch");
  v.batch_size = r.u32("batch_size");
  const std::uint32_t n = r.u32("count");
  const std::uint8_t st = r.u8("status");
  r.u8("pad");
  r.u16("pad");
  const std::uint32_t elen = r.u32("error length");
  if (r.ok() && elen > kMaxTextBytes)
    r.fail("error text of " + std::to_string(elen) + " bytes exceeds the limit");
  const std::size_t eat = r.skip(elen, "error text");
  const std::size_t at = r.entries(n, kOutputEntryBytes, kMaxEntries, "outputs");
  if (r.ok() && st > 1) r.fail("unknown batch status " + std::to_string(st));
  if (r.ok() && n == 0) r.fail("no outputs");
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; r.ok() && i < n; ++i)
    total += read_output_entry(r.at(at + std::size_t{i} * kOutputEntryBytes)).len;
  const std::size_t pat = r.skip(total, "output payload");
  if (Status s = r.finish(); !s.ok()) return s;
  v.status = static_cast<BatchStatus>(st);
  v.error = std::string_view(reinterpret_cast<const char*>(r.at(eat)), elen);
  v.entries = {r.at(at), n};
  v.payload = std::span<const std::uint8_t>(r.at(pat), static_cast<std::size_t>(total));
  return v;
}

Result<OutcomesView> decode_outcomes(std::span<const std::uint8_t> msg) {
  if (Status s = expect(msg, Kind::kOutcomes); !s.ok()) return s;
  Reader r(msg, Kind::kOutcomes);
  OutcomesView v;
  const std::uint32_t n = r.u32("count");
  const std::uint32_t tlen = r.u32("text length");
  if (r.ok() && tlen > kMaxTextBytes) r.fail("text of " + std::to_string(tlen) + " bytes exceeds the limit");
  const std::size_t tat = r.skip(tlen, "text");
  const std::size_t at = r.entries(n, kOutcomeEntryBytes, kMaxEntries, "outcomes");
  if (r.ok() && n == 0) r.fail("no outcomes");
  for (std::uint32_t i = 0; r.ok() && i < n; ++i) {
    const OutcomeEntry e = read_outcome_entry(r.at(at + std::size_t{i} * kOutcomeEntryBytes));
    const bool drop = e.outcome == static_cast<std::uint8_t>(Outcome::kDropped);
    const bool err = e.outcome == static_cast<std::uint8_t>(Outcome::kError);
    if (!drop && !err)
      r.fail("outcome " + std::to_string(e.outcome) + " is neither dropped nor error");
    else if (drop && (e.reason == 0 || e.reason >= kNumDropReasons))
      r.fail("unknown drop reason " + std::to_string(e.reason));
  }
  if (Status s = r.finish(); !s.ok()) return s;
  v.text = std::string_view(reinterpret_cast<const char*>(r.at(tat)), tlen);
  v.entries = {r.at(at), n};
  return v;
}

Status validate(std::span<const std::uint8_t> msg) {
  Result<Header> h = decode_header(msg);
  if (!h.ok()) return h.status();
  switch (h->kind) {
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
  }
  return Status(Errc::kInvalidArgument, "unknown message kind");
}

bool same_token(std::string_view got, std::string_view want) noexcept {
  if (got.size() != want.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < got.size(); ++i) diff |= static_cast<unsigned char>(got[i] ^ want[i]);
  return diff == 0;
}

}  // namespace symphony::rdma::wire
