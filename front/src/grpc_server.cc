// The protocol's gRPC transport (grpc_server.hpp).
#include "symphony/front/grpc_server.hpp"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <concurrentqueue/blockingconcurrentqueue.h>

#include "inference.grpc.pb.h"
#include "symphony/front/grpc_process.hpp"
#include "symphony/front/shared_memory.hpp"
#include "symphony/front/trace.hpp"

#include "internal.hpp"
#include "model_config.hpp"

namespace symphony::front {
namespace {

using detail::append;
using detail::ByteSink;
using detail::in_quotes;

grpc::StatusCode grpc_code(Code c) {
  switch (c) {
    case Code::kOk:
      return grpc::StatusCode::OK;
    case Code::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case Code::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case Code::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case Code::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case Code::kInternal:
      return grpc::StatusCode::INTERNAL;
    case Code::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case Code::kCancelled:
      return grpc::StatusCode::CANCELLED;
    case Code::kUnimplemented:
      return grpc::StatusCode::UNIMPLEMENTED;
  }
  return grpc::StatusCode::UNKNOWN;
}

// Converts typed contents to the binary form; false with *why on a value out
// of the datatype's range or contents of the wrong kind.
bool typed_to_bytes(const inference::InferTensorContents& c, DataType t, ByteSink& out, std::string* why) {
  auto ints = [&](auto tag, const auto& values) -> bool {
    using T = decltype(tag);
    for (auto v : values) {
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
        *why = "value " + std::to_string(v) + " does not fit " + std::string(to_string(t));
        return false;
      }
      append<T>(out, static_cast<T>(v));
    }
    return true;
  };
  switch (t) {
    case DataType::kBool:
      for (bool b : c.bool_contents()) out.push_back(b ? 1 : 0);
      return true;
    case DataType::kInt8:
      return ints(std::int8_t{}, c.int_contents());
    case DataType::kInt16:
      return ints(std::int16_t{}, c.int_contents());
    case DataType::kInt32:
      return ints(std::int32_t{}, c.int_contents());
    case DataType::kInt64:
      for (auto v : c.int64_contents()) append<std::int64_t>(out, v);
      return true;
    case DataType::kUint8:
      return ints(std::uint8_t{}, c.uint_contents());
    case DataType::kUint16:
      return ints(std::uint16_t{}, c.uint_contents());
    case DataType::kUint32:
      for (auto v : c.uint_contents()) append<std::uint32_t>(out, v);
      return true;
    case DataType::kUint64:
      for (auto v : c.uint64_contents()) append<std::uint64_t>(out, v);
      return true;
    case DataType::kFp32:
      for (float v : c.fp32_contents()) append<float>(out, v);
      return true;
    case DataType::kFp64:
      for (double v : c.fp64_contents()) append<double>(out, v);
      return true;
    case DataType::kBytes:
      for (const std::string& s : c.bytes_contents()) {
        append<std::uint32_t>(out, static_cast<std::uint32_t>(s.size()));
        out.append(s.data(), s.size());
      }
      return true;
    case DataType::kFp16:
    case DataType::kBf16:
      *why = std::string(to_string(t)) + " has no typed contents; send it in raw_input_contents";
      return false;
  }
  return false;
}

// The bytes typed contents of `t` take in the binary form; nullopt for BYTES
// (variable-length) and for FP16 and BF16 (which have none).
std::optional<std::size_t> typed_byte_count(const inference::InferTensorContents& c, DataType t) {
  const auto n = [&](int count) { return static_cast<std::size_t>(count) * element_size(t); };
  switch (t) {
    case DataType::kBool:
      return n(c.bool_contents_size());
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
      return n(c.int_contents_size());
    case DataType::kInt64:
      return n(c.int64_contents_size());
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
      return n(c.uint_contents_size());
    case DataType::kUint64:
      return n(c.uint64_contents_size());
    case DataType::kFp32:
      return n(c.fp32_contents_size());
    case DataType::kFp64:
      return n(c.fp64_contents_size());
    default:
      return std::nullopt;
  }
}

// A block of `landing` for `n` bytes of input `t`, which then holds its
// bytes (Tensor::held, kept by Tensor::keep); null with a RESOURCE_EXHAUSTED
// reply saying why when the landing cannot hold them now.
char* take_block(InputLanding* landing, std::size_t n, const std::string& who, Tensor& t, Reply* error) {
  std::shared_ptr<char> block = landing->take(t.name, n);
  if (!block) {
    *error = Reply::error(Code::kResourceExhausted, who + ": " + landing->refusal(t.name, n));
    return nullptr;
  }
  char* p = block.get();
  t.held = std::string_view(p, n);
  t.keep = std::move(block);
  return p;
}

bool convert_parameters(const google::protobuf::Map<std::string, inference::InferParameter>& in,
                        std::map<std::string, Parameter>* out) {
  for (const auto& [k, v] : in) {
    Parameter p;
    switch (v.parameter_choice_case()) {
      case inference::InferParameter::kBoolParam:
        p.kind = Parameter::Kind::kBool;
        p.b = v.bool_param();
        break;
      case inference::InferParameter::kInt64Param:
        p.kind = Parameter::Kind::kInt;
        p.i = v.int64_param();
        break;
      case inference::InferParameter::kUint64Param:
        p.kind = Parameter::Kind::kUint;
        p.u = v.uint64_param();
        break;
      case inference::InferParameter::kDoubleParam:
        p.kind = Parameter::Kind::kDouble;
        p.d = v.double_param();
        break;
      case inference::InferParameter::kStringParam:
        p.kind = Parameter::Kind::kString;
        p.s = v.string_param();
        break;
      default:
        continue;
    }
    (*out)[k] = std::move(p);
  }
  return true;
}

// raw_input_contents already in blocks of the host memory pool (read off the
// wire by read_infer_request), in order.
struct LandedRaw {
  std::shared_ptr<char> block;
  std::size_t size = 0;
};

// Builds the front's request from the message, taking the raw contents
// over (the message is the call's, and nothing reads it after this). With
// `landing` (the host memory pool, or the service's: input_landing.hpp), each
// input's bytes land in a block of it: typed contents decoded straight into
// the block, raw contents given as `landed` (else copied there once from the
// message); a request it cannot hold is refused with RESOURCE_EXHAUSTED.
bool to_request(inference::ModelInferRequest& m, InferRequest* out, Reply* error, InputLanding* pool,
                std::vector<LandedRaw>* landed = nullptr) {
  const auto bad = [&](std::string msg) {
    *error = Reply::error(Code::kInvalidArgument, std::move(msg));
    return false;
  };
  out->model = m.model_name();
  out->version = m.model_version();
  out->id = m.id();
  convert_parameters(m.parameters(), &out->parameters);
  // raw_input_contents holds one entry per input not in shared memory, in
  // order (as Triton reads it).
  std::vector<std::optional<SharedMemoryRef>> shm(static_cast<std::size_t>(m.inputs_size()));
  int raw_wanted = 0;
  for (int i = 0; i < m.inputs_size(); ++i) {
    std::map<std::string, Parameter> params;
    convert_parameters(m.inputs(i).parameters(), &params);
    if (std::optional<Reply> err = shared_memory_parameters(params, "input " + in_quotes(m.inputs(i).name()),
                                                            &shm[static_cast<std::size_t>(i)])) {
      *error = std::move(*err);
      return false;
    }
    if (!shm[static_cast<std::size_t>(i)]) ++raw_wanted;
  }
  const int raw_given = landed ? static_cast<int>(landed->size()) : m.raw_input_contents_size();
  const bool raw = raw_given > 0;
  if (raw && raw_given != raw_wanted)
    return bad("raw_input_contents has " + std::to_string(raw_given) + " entries for " +
               std::to_string(raw_wanted) + " inputs" +
               (raw_wanted != m.inputs_size() ? " not in shared memory" : ""));
  int raw_next = 0;
  for (int i = 0; i < m.inputs_size(); ++i) {
    inference::ModelInferRequest::InferInputTensor& in = *m.mutable_inputs(i);
    Tensor t;
    t.name = in.name();
    const std::string who = "input " + in_quotes(t.name);
    const auto type = parse_datatype(in.datatype());
    if (!type) return bad(who + ": unknown datatype " + in_quotes(in.datatype()));
    t.datatype = *type;
    t.shape.assign(in.shape().begin(), in.shape().end());
    t.shared_memory = std::move(shm[static_cast<std::size_t>(i)]);
    if (t.shared_memory) {
      if (in.has_contents()) return bad(who + " gives its bytes in shared memory and also as typed contents");
    } else if (raw) {
      if (in.has_contents()) return bad(who + " has typed contents although raw_input_contents is used");
      if (landed) {
        LandedRaw& l = (*landed)[static_cast<std::size_t>(raw_next++)];
        t.held = std::string_view(l.block.get(), l.size);
        t.keep = std::move(l.block);
        out->inputs.push_back(std::move(t));
        continue;
      }
      std::string& bytes = *m.mutable_raw_input_contents(raw_next++);
      if (pool) {
        char* p = take_block(pool, bytes.size(), who, t, error);
        if (!p) return false;
        std::memcpy(p, bytes.data(), bytes.size());
      } else {
        t.data.swap(bytes);
      }
    } else {
      std::string why;
      const std::optional<std::size_t> n = pool ? typed_byte_count(in.contents(), t.datatype) : std::nullopt;
      if (n) {
        char* p = take_block(pool, *n, who, t, error);
        if (!p) return false;
        ByteSink sink(p, *n);
        if (!typed_to_bytes(in.contents(), t.datatype, sink, &why)) return bad(who + ": " + why);
      } else {
        ByteSink sink(t.data);
        if (!typed_to_bytes(in.contents(), t.datatype, sink, &why)) return bad(who + ": " + why);
      }
    }
    out->inputs.push_back(std::move(t));
  }
  for (const auto& o : m.outputs()) {
    InferRequest::Output ro{o.name(), true, std::nullopt};
    std::map<std::string, Parameter> params;
    convert_parameters(o.parameters(), &params);
    if (std::optional<Reply> err =
            shared_memory_parameters(params, "output " + in_quotes(ro.name), &ro.shared_memory)) {
      *error = std::move(*err);
      return false;
    }
    out->outputs.push_back(std::move(ro));
  }
  return true;
}

// Reads protobuf's wire format across the slices of a received message.
class WireReader {
 public:
  WireReader(const std::vector<grpc::Slice>& slices, std::size_t length) : slices_(slices), left_(length) {}
  std::size_t left() const noexcept { return left_; }
  bool byte(std::uint8_t* b) {
    if (!settle()) return false;
    *b = slices_[i_].begin()[off_];
    ++off_;
    --left_;
    return true;
  }
  bool varint(std::uint64_t* v) {
    *v = 0;
    for (int k = 0; k < 10; ++k) {
      std::uint8_t b = 0;
      if (!byte(&b)) return false;
      *v |= static_cast<std::uint64_t>(b & 0x7f) << (7 * k);
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Hands the next `n` bytes to `take(pointer, count)`, a run per slice.
  template <class Take>
  bool bytes(std::size_t n, Take&& take) {
    if (n > left_) return false;
    while (n > 0) {
      if (!settle()) return false;
      const std::size_t k = std::min(n, slices_[i_].size() - off_);
      take(reinterpret_cast<const char*>(slices_[i_].begin()) + off_, k);
      off_ += k;
      left_ -= k;
      n -= k;
    }
    return true;
  }

 private:
  bool settle() {
    while (i_ < slices_.size() && off_ == slices_[i_].size()) {
      ++i_;
      off_ = 0;
    }
    return i_ < slices_.size() && left_ > 0;
  }
  const std::vector<grpc::Slice>& slices_;
  std::size_t i_ = 0, off_ = 0, left_;
};

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Reads a ModelInferRequest off the wire. `*landing` becomes where its
// inputs land (Front::input_landing for the model and version the message
// names: a look at its fields' headers finds them). With one, each entry of
// raw_input_contents (field 7) is copied from gRPC's buffers straight into
// a block of it (`landed`: the one copy of those bytes on the server), after
// protobuf has parsed the rest of the message (names, shapes, parameters,
// typed contents), so that each entry's block is taken for its input's
// name; without, protobuf parses all of it. False with an INVALID_ARGUMENT
// reply when the bytes are no ModelInferRequest; an entry the landing
// cannot hold sets `*exhausted` (the rest is still parsed, so the refusal
// can be counted against its model).
bool read_infer_request(const grpc::ByteBuffer& in, const Front& front, inference::ModelInferRequest* m,
                        std::shared_ptr<InputLanding>* landing, std::vector<LandedRaw>* landed,
                        std::optional<Reply>* exhausted, Reply* error) {
  const auto malformed = [&] {
    *error = Reply::error(Code::kInvalidArgument, "the request is not a valid inference.ModelInferRequest");
    return false;
  };
  constexpr std::uint64_t kModelName = 1, kModelVersion = 2, kRawInputContents = 7, kLengthDelimited = 2;
  std::vector<grpc::Slice> slices;
  if (!in.Dump(&slices).ok()) return malformed();
  // Whether the message has raw contents, and the model and version it names
  // (a look at its fields' headers; anything odd is left to the full read
  // below to refuse).
  bool raw = false, odd = false;
  std::string model, version;
  {
    WireReader look(slices, in.Length());
    const auto skip = [](const char*, std::size_t) {};
    while (look.left() > 0 && !odd) {
      std::uint64_t tag = 0, v = 0;
      if (!look.varint(&tag)) {
        odd = true;
      } else if ((tag & 7) == kLengthDelimited && ((tag >> 3) == kModelName || (tag >> 3) == kModelVersion)) {
        std::string& to = (tag >> 3) == kModelName ? model : version;
        to.clear();
        odd = !look.varint(&v) || !look.bytes(v, [&to](const char* p, std::size_t n) { to.append(p, n); });
      } else if ((tag & 7) == 0) {
        odd = !look.varint(&v);
      } else if ((tag & 7) == 1 || (tag & 7) == 5) {
        odd = !look.bytes((tag & 7) == 1 ? 8 : 4, skip);
      } else if ((tag & 7) == kLengthDelimited) {
        raw |= (tag >> 3) == kRawInputContents;
        odd = !look.varint(&v) || !look.bytes(v, skip);
      } else {
        odd = true;
      }
    }
  }
  if (!odd) *landing = front.input_landing(model, version);
  if (!*landing || !raw) {
    // protobuf reads it all from gRPC's buffers (typed contents: no copy
    // before the decode; raw contents: into the message's strings).
    grpc::ByteBuffer copy(in);  // shares the slices; deserializing consumes the buffer
    if (!grpc::GenericDeserialize<grpc::ProtoBufferReader, inference::ModelInferRequest>(&copy, m).ok())
      return malformed();
    return true;
  }
  // Every field but raw_input_contents, re-encoded and parsed by protobuf.
  std::string rest;
  {
    WireReader r(slices, in.Length());
    const auto append = [&rest](const char* p, std::size_t n) { rest.append(p, n); };
    const auto skip = [](const char*, std::size_t) {};
    while (r.left() > 0) {
      std::uint64_t tag = 0, v = 0;
      if (!r.varint(&tag) || (tag >> 3) == 0) return malformed();
      if ((tag >> 3) == kRawInputContents && (tag & 7) == kLengthDelimited) {
        if (!r.varint(&v) || v > r.left() || !r.bytes(v, skip)) return malformed();
        continue;
      }
      put_varint(rest, tag);
      switch (tag & 7) {
        case 0:
          if (!r.varint(&v)) return malformed();
          put_varint(rest, v);
          break;
        case 1:
          if (!r.bytes(8, append)) return malformed();
          break;
        case 5:
          if (!r.bytes(4, append)) return malformed();
          break;
        case kLengthDelimited:
          if (!r.varint(&v) || v > r.left()) return malformed();
          put_varint(rest, v);
          if (!r.bytes(v, append)) return malformed();
          break;
        default:  // groups (3, 4) are not in this message
          return malformed();
      }
    }
  }
  if (!m->ParseFromString(rest)) return malformed();
  // Raw entry i is the bytes of the i-th input not in shared memory (as
  // to_request reads them; a count that does not match is refused there).
  std::vector<std::string_view> names;
  for (const auto& input : m->inputs())
    if (input.parameters().count("shared_memory_region") == 0) names.push_back(input.name());
  WireReader r(slices, in.Length());
  const auto skip = [](const char*, std::size_t) {};
  while (r.left() > 0) {
    std::uint64_t tag = 0, v = 0;
    if (!r.varint(&tag)) return malformed();
    switch (tag & 7) {
      case 0:
        if (!r.varint(&v)) return malformed();
        continue;
      case 1:
      case 5:
        if (!r.bytes((tag & 7) == 1 ? 8 : 4, skip)) return malformed();
        continue;
      default:
        if (!r.varint(&v) || v > r.left()) return malformed();
        break;
    }
    if ((tag >> 3) != kRawInputContents) {
      if (!r.bytes(v, skip)) return malformed();
      continue;
    }
    const std::size_t i = landed->size();
    const std::string_view name = i < names.size() ? names[i] : std::string_view();
    std::shared_ptr<char> block = exhausted->has_value() ? nullptr : (*landing)->take(name, v);
    if (!block) {
      if (!exhausted->has_value())
        *exhausted = Reply::error(Code::kResourceExhausted, "raw_input_contents[" + std::to_string(i) +
                                                                "]: " + (*landing)->refusal(name, v));
      if (!r.bytes(v, skip)) return malformed();
      continue;
    }
    char* to = block.get();
    if (!r.bytes(v, [&to](const char* p, std::size_t n) {
          std::memcpy(to, p, n);
          to += n;
        }))
      return malformed();
    landed->push_back({std::move(block), v});
  }
  return true;
}

// The gRPC deadline of the call as time from now, if it has one (zero when
// it has passed: Front::infer answers it expired).
std::optional<Duration> call_deadline(const grpc::CallbackServerContext* ctx) {
  const auto d = ctx->deadline();
  if (d == std::chrono::system_clock::time_point::max()) return std::nullopt;
  const auto left =
      std::chrono::duration_cast<std::chrono::nanoseconds>(d - std::chrono::system_clock::now());
  return Duration::nanoseconds(std::max<std::int64_t>(left.count(), 0));
}

// A successful reply as the protocol's response: raw contents, the outputs
// asked for (all when none were), Symphony's outcome as parameters.
void fill_response(const Reply& r, const std::vector<InferRequest::Output>& asked,
                   inference::ModelInferResponse* resp) {
  resp->set_model_name(r.model);
  resp->set_model_version(r.version);
  resp->set_id(r.id);
  (*resp->mutable_parameters())["outcome"].set_string_param(std::string(to_string(r.outcome)));
  (*resp->mutable_parameters())["batch_size"].set_int64_param(r.batch_size);
  for (const Tensor& t : r.outputs) {
    const InferRequest::Output* a = nullptr;
    for (const auto& o : asked)
      if (o.name == t.name) a = &o;
    if (!asked.empty() && !a) continue;
    auto* o = resp->add_outputs();
    o->set_name(t.name);
    o->set_datatype(std::string(to_string(t.datatype)));
    for (std::int64_t d : t.shape) o->add_shape(d);
    if (a && a->shared_memory) {
      // In the region already (Front::infer wrote it): its parameters, and
      // an empty entry that keeps raw_output_contents one per output.
      auto& ps = *o->mutable_parameters();
      ps["shared_memory_region"].set_string_param(a->shared_memory->region);
      ps["shared_memory_offset"].set_int64_param(static_cast<std::int64_t>(a->shared_memory->offset));
      ps["shared_memory_byte_size"].set_int64_param(static_cast<std::int64_t>(a->shared_memory->byte_size));
      resp->add_raw_output_contents();
      continue;
    }
    resp->add_raw_output_contents(t.data);
  }
}

// The threads that write the answers of inferences (docs/architecture.md#front): a
// request ends on a scheduler's thread (serve's shard, a cluster frontend's
// network thread), and gRPC runs a call's Finish or Write inline, transport
// and socket included, on the thread that calls it; that thread must not be
// the scheduler's. An answer given while its call's own reaction runs (the
// front's refusals, admission's on the submitting thread) is written inline.
class Answerers {
 public:
  Answerers() {
    const unsigned n = std::clamp(std::thread::hardware_concurrency() / 4, 1u, 4u);
    for (unsigned i = 0; i < n; ++i)
      threads_.emplace_back([this] {
        pthread_setname_np(pthread_self(), "sym-grpc-answer");
        std::function<void()> task;
        for (;;) {
          queue_.wait_dequeue(task);
          if (!task) return;  // stop()
          task();
          task = nullptr;
        }
      });
  }
  ~Answerers() { stop(); }
  void post(std::function<void()> task) { queue_.enqueue(std::move(task)); }
  // Writes what was posted, then joins. After the gRPC server's Wait():
  // every call has ended, so nothing is posted any more.
  void stop() {
    for (std::size_t i = 0; i < threads_.size(); ++i) queue_.enqueue(nullptr);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  moodycamel::BlockingConcurrentQueue<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
};

// The repeated refusals held per connection (GrpcOptions::overload_hold,
// grpc_server.hpp). A connection is known by its peer address; one with no
// refusal within the hold and none held is forgotten (pruned as the table
// grows). The calls' alarms answer them; release() once each fires.
class RefusalHolds {
 public:
  explicit RefusalHolds(Duration hold) : hold_(hold) {}

  // Whether the refusal about to be answered on `ctx`'s call waits, and
  // until when (*until); counts it held on its connection (*peer) if so.
  bool take(grpc::CallbackServerContext* ctx, std::chrono::system_clock::time_point* until,
            std::string* peer) {
    if (hold_ <= Duration::zero()) return false;
    const auto wall = std::chrono::system_clock::now();
    *until = wall + std::chrono::nanoseconds(spread_hold(hold_).ns());
    // The client's library ends the call at its deadline (DEADLINE_EXCEEDED):
    // the refusal is answered before it, as a refusal.
    if (ctx->deadline() != std::chrono::system_clock::time_point::max())
      *until = std::min(*until, ctx->deadline() - std::chrono::milliseconds(2));
    const TimePoint now = SteadyClock{}.now();
    *peer = ctx->peer();
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    Conn& c = conns_[*peer];
    const bool again = now - c.last < hold_;
    c.last = now;
    if (!again || c.held >= GrpcServer::kMaxHeldPerConnection || *until <= wall) {
      if (conns_.size() > prune_at_) prune(now);
      return false;
    }
    ++c.held;
    held_total_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  // A held refusal is answered now: its connection's hold counts from here.
  void release(const std::string& peer) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = conns_.find(peer);
    if (it == conns_.end()) return;
    --it->second.held;
    it->second.last = SteadyClock{}.now();
  }
  // No refusal is held from now on (those held are answered as their alarms
  // fire, within the hold).
  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  std::uint64_t held() const noexcept { return held_total_.load(std::memory_order_relaxed); }

 private:
  struct Conn {
    TimePoint last = TimePoint::neg_infinite();  // its last refusal taken or held one answered
    std::uint32_t held = 0;
  };
  void prune(TimePoint now) {
    std::erase_if(conns_,
                  [&](const auto& kv) { return kv.second.held == 0 && now - kv.second.last >= hold_; });
    prune_at_ = std::max<std::size_t>(1024, 2 * conns_.size());
  }

  const Duration hold_;
  std::mutex mu_;
  std::unordered_map<std::string, Conn> conns_;
  std::size_t prune_at_ = 1024;
  bool stopping_ = false;
  std::atomic<std::uint64_t> held_total_{0};
};

// The call whose reaction this thread runs now (see Answerers).
thread_local const void* t_reacting = nullptr;

class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(Front& front, Answerers& answerers, RefusalHolds& holds, grpc::CallbackServerContext* ctx,
               grpc::ByteBuffer* resp)
      : front_(front), answerers_(answerers), holds_(holds), ctx_(ctx), out_(resp) {}

  void start(const grpc::ByteBuffer& bytes) {
    if (trace::enabled()) tr_.received = trace::now();
    inference::ModelInferRequest req;
    std::vector<LandedRaw> landed;
    std::optional<Reply> exhausted;
    InferRequest r;
    Reply err;
    std::shared_ptr<InputLanding> landing;
    if (!read_infer_request(bytes, front_, &req, &landing, &landed, &exhausted, &err))
      return finish(err);  // no message, no model to count it against (as gRPC's own parse failure)
    if (exhausted) {
      front_.count_rejected(req.model_name(), *exhausted);
      return finish(*exhausted);
    }
    if (!to_request(req, &r, &err, landing.get(), landing ? &landed : nullptr)) {
      front_.count_rejected(req.model_name(), err);
      return finish(err);
    }
    r.landing = std::move(landing);
    const std::optional<Duration> deadline = call_deadline(ctx_);
    asked_ = r.outputs;
    if (trace::enabled()) {
      tr_.parsed = trace::now();
      traced_ = true;
    }
    t_reacting = this;
    const std::uint64_t t = front_.infer(std::move(r), deadline, [this](Reply&& reply) {
      if (t_reacting == this) return finish(reply);
      answerers_.post([this, reply = std::move(reply)] { finish(reply); });
    });
    t_reacting = nullptr;
    ticket_.store(t, std::memory_order_release);
    if (cancelled_.load(std::memory_order_acquire)) front_.cancel(t);
  }

  void OnCancel() override {
    cancelled_.store(true, std::memory_order_release);
    if (const std::uint64_t t = ticket_.load(std::memory_order_acquire)) front_.cancel(t);
  }
  void OnDone() override {
    if (traced_) {
      tr_.written = trace::now();
      trace::record("grpc", tr_, tr_times_);
    }
    delete this;
  }

 private:
  void finish(const Reply& r) {
    if (traced_) {
      tr_.io = trace::now();
      tr_.outcome = trace::outcome_of(r.accepted, r.outcome);
      tr_times_ = r.times;
    }
    if (r.accepted) {
      ctx_->AddTrailingMetadata("symphony-outcome", std::string(to_string(r.outcome)));
      if (r.outcome == Outcome::kDropped)
        ctx_->AddTrailingMetadata("symphony-drop-reason", std::string(to_string(r.reason)));
    }
    if (r.code != Code::kOk) {
      grpc::Status st(grpc_code(r.code), r.message);
      std::chrono::system_clock::time_point until;
      if (holdable_refusal(r) && holds_.take(ctx_, &until, &held_on_)) {
        hold_ = std::make_unique<grpc::Alarm>();
        hold_->Set(until, [this, st = std::move(st)](bool) {
          holds_.release(held_on_);
          Finish(st);
        });
        return;
      }
      return Finish(st);
    }
    fill_response(r, asked_, &resp_);
    bool own = false;
    grpc::Status s =
        grpc::GenericSerialize<grpc::ProtoBufferWriter, inference::ModelInferResponse>(resp_, out_, &own);
    if (traced_) tr_.encoded = trace::now();
    front_.reply_left(r.times);
    Finish(s);
  }

  Front& front_;
  Answerers& answerers_;
  RefusalHolds& holds_;
  grpc::CallbackServerContext* ctx_;
  grpc::ByteBuffer* out_;              // the call's response, serialized by hand (ModelInfer is raw)
  std::unique_ptr<grpc::Alarm> hold_;  // answers a held refusal (RefusalHolds)
  std::string held_on_;                // the connection it is held on
  inference::ModelInferResponse resp_;
  std::vector<InferRequest::Output> asked_;
  std::atomic<std::uint64_t> ticket_{0};
  std::atomic<bool> cancelled_{false};
  // Stage times (trace.hpp; only when tracing).
  bool traced_ = false;
  trace::Transport tr_;
  ServiceTimes tr_times_;
};

// ModelStreamInfer: every request read from the stream goes through the
// front as a unary call's would (same checks, budget from the call's
// deadline or the `timeout` parameter, same accounting) and is answered once
// on the stream, in the order the requests end. A cancelled stream (the
// client's cancel or deadline, a broken connection) cancels what is still
// queued. The reactor finishes only once every request has ended, so no
// callback outlives it. At most kMaxOutstanding requests per stream are
// unanswered or unwritten at once: beyond that it stops reading.
class StreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  static constexpr std::size_t kMaxOutstanding = 1024;

  StreamReactor(Front& front, Answerers& answerers, grpc::CallbackServerContext* ctx)
      : front_(front), answerers_(answerers), ctx_(ctx) {
    reading_ = true;
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (ok) submit();
    std::unique_lock<std::mutex> lock(mu_);
    reading_ = false;
    if (!ok) read_done_ = true;
    step(lock);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    if (ok) {
      out_.pop_front();
    } else {
      broken_ = true;  // the stream is gone: later answers go nowhere
      out_.clear();
    }
    step(lock);
  }

  void OnCancel() override {
    Front& front = front_;  // step() may finish the stream, which deletes this
    std::vector<std::uint64_t> tickets;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cancelled_ = true;
      for (const auto& [seq, t] : tickets_)
        if (t) tickets.push_back(t);
      step(lock);
    }
    for (std::uint64_t t : tickets) front.cancel(t);
  }

  void OnDone() override { delete this; }

 private:
  void submit() {
    trace::Transport tr;  // stage times, when tracing ("grpc_stream"; no `written`: writes are batched)
    if (trace::enabled()) tr.received = trace::now();
    inference::ModelInferRequest req;
    std::vector<LandedRaw> landed;
    std::optional<Reply> exhausted;
    InferRequest r;
    Reply err;
    std::shared_ptr<InputLanding> landing;
    if (!read_infer_request(in_, front_, &req, &landing, &landed, &exhausted, &err))
      return answer(err, {});  // no message, no model to count it against
    if (exhausted) err = std::move(*exhausted);
    if (exhausted || !to_request(req, &r, &err, landing.get(), landing ? &landed : nullptr)) {
      front_.count_rejected(req.model_name(), err);
      err.model = req.model_name();
      err.version = req.model_version();
      err.id = req.id();
      return answer(err, {});
    }
    r.landing = std::move(landing);
    std::uint64_t seq;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seq = ++seq_;
      tickets_.emplace(seq, 0);
    }
    auto asked = std::make_shared<std::vector<InferRequest::Output>>(r.outputs);
    if (trace::enabled()) tr.parsed = trace::now();
    t_reacting = this;
    const std::uint64_t t =
        front_.infer(std::move(r), call_deadline(ctx_), [this, seq, asked, tr](Reply&& reply) mutable {
          if (t_reacting == this) return answer(reply, *asked, seq, &tr);
          answerers_.post([this, seq, asked, tr, reply = std::move(reply)]() mutable {
            answer(reply, *asked, seq, &tr);
          });
        });
    t_reacting = nullptr;
    bool cancel = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = tickets_.find(seq);
      if (it != tickets_.end()) {
        it->second = t;
        cancel = cancelled_;
      }
    }
    if (cancel) front_.cancel(t);
  }

  // Queues the answer to a request (any thread); `seq` names an accepted
  // one, 0 a request refused before it reached the front.
  void answer(const Reply& r, const std::vector<InferRequest::Output>& asked, std::uint64_t seq = 0,
              trace::Transport* tr = nullptr) {
    const bool traced = tr && tr->parsed != TimePoint();
    if (traced) tr->io = trace::now();
    inference::ModelStreamInferResponse resp;
    if (r.code == Code::kOk) {
      fill_response(r, asked, resp.mutable_infer_response());
    } else {
      resp.set_error_message(std::string(to_string(r.code)) + ": " + r.message);
      inference::ModelInferResponse* ir = resp.mutable_infer_response();
      ir->set_model_name(r.model);
      ir->set_model_version(r.version);
      ir->set_id(r.id);
      if (r.accepted) {
        (*ir->mutable_parameters())["outcome"].set_string_param(std::string(to_string(r.outcome)));
        if (r.outcome == Outcome::kDropped)
          (*ir->mutable_parameters())["drop_reason"].set_string_param(std::string(to_string(r.reason)));
      }
    }
    grpc::ByteBuffer bytes;
    bool own = false;
    const bool serialized =
        grpc::GenericSerialize<grpc::ProtoBufferWriter, inference::ModelStreamInferResponse>(resp, &bytes,
                                                                                             &own)
            .ok();
    if (traced) {
      tr->encoded = trace::now();
      tr->outcome = trace::outcome_of(r.accepted, r.outcome);
      trace::record("grpc_stream", *tr, r.times);
    }
    front_.reply_left(r.times);  // queued behind the stream's writes: about when it leaves
    std::unique_lock<std::mutex> lock(mu_);
    if (seq) tickets_.erase(seq);
    if (!broken_ && serialized) out_.push_back(std::move(bytes));
    step(lock);
  }

  // Starts what the state allows, outside the lock (gRPC may run a
  // reaction inline), and leaves `lock` unlocked: the next write; the next
  // read, unless the stream ended or too many requests are outstanding; or
  // Finish, once no request will be read (the client sent its last, or the
  // stream was cancelled), every request ended and every answer was written.
  void step(std::unique_lock<std::mutex>& lock) {
    grpc::ByteBuffer* write = nullptr;
    bool read = false, finish = false;
    if (!writing_ && !out_.empty() && !broken_) {
      writing_ = true;
      write = &out_.front();
    }
    if (!reading_ && !read_done_ && !cancelled_ && tickets_.size() + out_.size() < kMaxOutstanding) {
      reading_ = true;
      read = true;
      in_.Clear();
    }
    if (!finished_ && (read_done_ || cancelled_) && !reading_ && tickets_.empty() && !writing_ &&
        out_.empty()) {
      finished_ = true;
      finish = true;
    }
    const bool cancelled = cancelled_;
    lock.unlock();
    if (write) StartWrite(write);
    if (read) StartRead(&in_);
    if (finish) Finish(cancelled ? grpc::Status::CANCELLED : grpc::Status::OK);  // this may be gone after
  }

  Front& front_;
  Answerers& answerers_;
  grpc::CallbackServerContext* ctx_;
  // The read in progress (a ModelInferRequest's bytes, read by hand as
  // ModelInfer's are: raw contents straight into the host memory pool).
  grpc::ByteBuffer in_;
  std::mutex mu_;                     // everything below
  std::deque<grpc::ByteBuffer> out_;  // answers (ModelStreamInferResponse) to write; front() is being written
  // The unanswered requests: seq -> ticket (0: not returned yet).
  std::unordered_map<std::uint64_t, std::uint64_t> tickets_;
  std::uint64_t seq_ = 0;
  bool reading_ = false, read_done_ = false, writing_ = false;
  bool cancelled_ = false, broken_ = false, finished_ = false;
};

// The service's methods on the callback API, as GRPCInferenceService::
// CallbackService chains them, but ModelInfer and ModelStreamInfer raw:
// their requests' bytes are read by hand (read_infer_request), so
// raw_input_contents go from gRPC's buffers straight into the host memory
// pool. (A raw stream method cannot be stacked on the typed one: their
// signatures differ only in the return type.) A method added to the proto
// must be added here.
using gis = inference::GRPCInferenceService;
using CallbackServiceRawInfer = gis::WithCallbackMethod_ServerLive<gis::WithCallbackMethod_ServerReady<
    gis::WithCallbackMethod_ModelReady<gis::WithCallbackMethod_ServerMetadata<
        gis::WithCallbackMethod_ModelMetadata<gis::WithRawCallbackMethod_ModelInfer<
            gis::WithCallbackMethod_RepositoryIndex<gis::WithCallbackMethod_RepositoryModelLoad<
                gis::WithCallbackMethod_RepositoryModelUnload<gis::WithRawCallbackMethod_ModelStreamInfer<
                    gis::WithCallbackMethod_ModelConfig<gis::WithCallbackMethod_ModelStatistics<
                        gis::WithCallbackMethod_SystemSharedMemoryStatus<
                            gis::WithCallbackMethod_SystemSharedMemoryRegister<
                                gis::WithCallbackMethod_SystemSharedMemoryUnregister<
                                    gis::WithCallbackMethod_CudaSharedMemoryStatus<
                                        gis::WithCallbackMethod_CudaSharedMemoryRegister<
                                            gis::WithCallbackMethod_CudaSharedMemoryUnregister<
                                                gis::Service>>>>>>>>>>>>>>>>>>;
static_assert(std::is_base_of_v<gis::Service, CallbackServiceRawInfer>);

class Service final : public CallbackServiceRawInfer {
 public:
  Service(Front& f, Answerers& a, RefusalHolds& h) : front_(f), answerers_(a), holds_(h) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx, const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* resp) override {
    resp->set_live(front_.live());
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx,
                                        const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* resp) override {
    resp->set_ready(front_.ready());
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx,
                                       const inference::ModelReadyRequest* req,
                                       inference::ModelReadyResponse* resp) override {
    Reply err;
    // A model the repository holds but that is not loaded is not ready (as
    // Triton answers); NOT_FOUND only for a name the server does not know.
    if (!front_.model(req->name(), req->version(), &err)) {
      if (err.code != Code::kUnavailable) return done(ctx, grpc::Status(grpc_code(err.code), err.message));
      resp->set_ready(false);
      return done(ctx, grpc::Status::OK);
    }
    resp->set_ready(front_.model_ready(req->name(), req->version()));
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* resp) override {
    resp->set_name(front_.server_name());
    resp->set_version(std::string(Front::server_version()));
    for (const std::string& e : front_.extensions()) resp->add_extensions(e);
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const inference::ModelMetadataRequest* req,
                                          inference::ModelMetadataResponse* resp) override {
    Reply err;
    auto m = front_.model(req->name(), req->version(), &err);
    if (!m) return done(ctx, grpc::Status(grpc_code(err.code), err.message));
    resp->set_name(m->name);
    for (const std::string& v : m->versions) resp->add_versions(v);
    resp->set_platform(m->platform);
    auto fill = [](const TensorSpec& s, inference::ModelMetadataResponse::TensorMetadata* t) {
      t->set_name(s.name);
      t->set_datatype(std::string(to_string(s.datatype)));
      for (std::int64_t d : s.shape) t->add_shape(d);
    };
    for (const TensorSpec& s : m->inputs) fill(s, resp->add_inputs());
    for (const TensorSpec& s : m->outputs) fill(s, resp->add_outputs());
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ModelStreamInfer(
      grpc::CallbackServerContext* ctx) override {
    return new StreamReactor(front_, answerers_, ctx);
  }
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx,
                                        const inference::ModelConfigRequest* req,
                                        inference::ModelConfigResponse* resp) override {
    Reply err;
    auto m = front_.model(req->name(), req->version(), &err);
    if (!m) return done(ctx, grpc::Status(grpc_code(err.code), err.message));
    if (!detail::effective_config(*m, resp->mutable_config()))
      return done(ctx, grpc::Status(grpc::StatusCode::INTERNAL,
                                    "the configuration of model " + in_quotes(m->name) + " does not parse"));
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx,
                                            const inference::ModelStatisticsRequest* req,
                                            inference::ModelStatisticsResponse* resp) override {
    Reply err;
    auto stats = front_.statistics(req->name(), req->version(), &err);
    if (!stats) return done(ctx, grpc::Status(grpc_code(err.code), err.message));
    const auto fill = [](const StatDuration& d, inference::StatisticDuration* out) {
      out->set_count(d.count);
      out->set_ns(d.ns);
    };
    for (const front::ModelStatistics& s : *stats) {
      inference::ModelStatistics* o = resp->add_model_stats();
      o->set_name(s.name);
      o->set_version(s.version);
      o->set_last_inference(s.last_inference_ms);
      o->set_inference_count(s.inference_count);
      o->set_execution_count(s.execution_count);
      inference::InferStatistics* is = o->mutable_inference_stats();
      fill(s.success, is->mutable_success());
      fill(s.fail, is->mutable_fail());
      fill(s.queue, is->mutable_queue());
      fill(s.compute_input, is->mutable_compute_input());
      fill(s.compute_infer, is->mutable_compute_infer());
      fill(s.compute_output, is->mutable_compute_output());
      for (const front::ModelStatistics::Batch& b : s.batch_stats) {
        inference::InferBatchStatistics* ob = o->add_batch_stats();
        ob->set_batch_size(b.batch_size);
        fill(b.compute_input, ob->mutable_compute_input());
        fill(b.compute_infer, ob->mutable_compute_infer());
        fill(b.compute_output, ob->mutable_compute_output());
      }
    }
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                       grpc::ByteBuffer* resp) override {
    auto* r = new InferReactor(front_, answerers_, holds_, ctx, resp);
    r->start(*req);
    return r;
  }

  // The shared memory extensions (shared_memory.hpp).
  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryStatusRequest* req,
      inference::SystemSharedMemoryStatusResponse* resp) override {
    if (std::optional<Reply> off = front_.shared_memory_refusal()) return done(ctx, status_of(*off));
    std::vector<SharedMemoryRegistry::RegionStatus> regions;
    if (std::optional<Reply> bad = front_.shared_memory().status(req->name(), &regions))
      return done(ctx, status_of(*bad));
    for (const SharedMemoryRegistry::RegionStatus& r : regions) {
      auto& o = (*resp->mutable_regions())[r.name];
      o.set_name(r.name);
      o.set_key(r.key);
      o.set_offset(r.offset);
      o.set_byte_size(r.byte_size);
    }
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest* req,
      inference::SystemSharedMemoryRegisterResponse*) override {
    if (std::optional<Reply> off = front_.shared_memory_refusal()) return done(ctx, status_of(*off));
    std::optional<Reply> bad =
        front_.shared_memory().register_region(req->name(), req->key(), req->offset(), req->byte_size());
    return done(ctx, bad ? status_of(*bad) : grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest* req,
      inference::SystemSharedMemoryUnregisterResponse*) override {
    if (std::optional<Reply> off = front_.shared_memory_refusal()) return done(ctx, status_of(*off));
    front_.shared_memory().unregister(req->name());
    return done(ctx, grpc::Status::OK);
  }
  // CUDA shared memory: without the CUDA calls (FrontOptions::cuda_ipc) no
  // region exists and registering is UNIMPLEMENTED.
  grpc::ServerUnaryReactor* CudaSharedMemoryStatus(grpc::CallbackServerContext* ctx,
                                                   const inference::CudaSharedMemoryStatusRequest* req,
                                                   inference::CudaSharedMemoryStatusResponse* resp) override {
    SharedMemoryRegistry& shm = front_.shared_memory();
    if (shm.has_cuda())
      if (std::optional<Reply> off = front_.shared_memory_refusal()) return done(ctx, status_of(*off));
    std::vector<SharedMemoryRegistry::RegionStatus> regions;
    if (std::optional<Reply> bad = shm.status(req->name(), &regions, /*cuda=*/true))
      return done(ctx, status_of(*bad));
    for (const SharedMemoryRegistry::RegionStatus& r : regions) {
      auto& o = (*resp->mutable_regions())[r.name];
      o.set_name(r.name);
      o.set_device_id(static_cast<std::uint64_t>(r.device_id));
      o.set_byte_size(r.byte_size);
    }
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* CudaSharedMemoryRegister(grpc::CallbackServerContext* ctx,
                                                     const inference::CudaSharedMemoryRegisterRequest* req,
                                                     inference::CudaSharedMemoryRegisterResponse*) override {
    SharedMemoryRegistry& shm = front_.shared_memory();
    if (!shm.has_cuda())
      return done(ctx, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, std::string(kNoCudaSharedMemory)));
    if (std::optional<Reply> off = front_.shared_memory_refusal()) return done(ctx, status_of(*off));
    std::optional<Reply> bad =
        shm.register_cuda_region(req->name(), req->raw_handle(), req->device_id(), req->byte_size());
    return done(ctx, bad ? status_of(*bad) : grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(
      grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryUnregisterRequest* req,
      inference::CudaSharedMemoryUnregisterResponse*) override {
    SharedMemoryRegistry& shm = front_.shared_memory();
    if (shm.has_cuda())
      if (std::optional<Reply> off = front_.shared_memory_refusal()) return done(ctx, status_of(*off));
    shm.unregister(req->name(), /*cuda=*/true);
    return done(ctx, grpc::Status::OK);
  }

  // The model repository extension. Load and unload answer when done, from
  // the service's thread (the reactor outlives the call until Finish).
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx,
                                            const inference::RepositoryIndexRequest* req,
                                            inference::RepositoryIndexResponse* resp) override {
    if (!front_.has_repository()) return done(ctx, no_repository());
    for (const InferenceService::IndexEntry& e : front_.repository_index(req->ready())) {
      auto* m = resp->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* ctx,
                                                const inference::RepositoryModelLoadRequest* req,
                                                inference::RepositoryModelLoadResponse*) override {
    if (!front_.has_repository()) return done(ctx, no_repository());
    std::string config;
    for (const auto& [k, v] : req->parameters()) {
      if (k == "config") {
        if (v.parameter_choice_case() == inference::ModelRepositoryParameter::kStringParam)
          config = v.string_param();
        else if (v.parameter_choice_case() == inference::ModelRepositoryParameter::kBytesParam)
          config = v.bytes_param();
        else
          return done(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                        "parameter 'config' must be a ModelConfig in JSON (a string)"));
      } else if (k.rfind("file:", 0) == 0) {
        return done(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                      "parameter '" + k +
                                          "': model files sent with the request are not supported; put "
                                          "them in the repository"));
      }
    }
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    front_.repository_load(req->model_name(), std::move(config),
                           [r](Reply&& reply) { r->Finish(status_of(reply)); });
    return r;
  }
  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* ctx,
                                                  const inference::RepositoryModelUnloadRequest* req,
                                                  inference::RepositoryModelUnloadResponse*) override {
    if (!front_.has_repository()) return done(ctx, no_repository());
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    front_.repository_unload(req->model_name(), [r](Reply&& reply) { r->Finish(status_of(reply)); });
    return r;
  }

 private:
  static grpc::Status no_repository() {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "this server has no model repository (symphony serve --model-repository DIR)");
  }
  static grpc::Status status_of(const Reply& r) {
    return r.code == Code::kOk ? grpc::Status::OK : grpc::Status(grpc_code(r.code), r.message);
  }
  static grpc::ServerUnaryReactor* done(grpc::CallbackServerContext* ctx, const grpc::Status& s) {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    r->Finish(s);
    return r;
  }
  Front& front_;
  Answerers& answerers_;
  RefusalHolds& holds_;
};

}  // namespace

struct GrpcServer::Impl {
  Impl(Front& f, Duration hold) : holds(hold), service(f, answerers, holds) {}
  Answerers answerers;  // before the service, which holds it
  RefusalHolds holds;
  Service service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  bool stopped = false;
};

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcServer::~GrpcServer() { stop(Duration::zero()); }

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(Front& front, GrpcOptions o) {
  set_grpc_process_defaults();
  auto impl = std::make_unique<Impl>(front, o.overload_hold);
  const std::string where =
      (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) + ":" + std::to_string(o.port);
  grpc::ServerBuilder b;
  b.AddListeningPort(where, grpc::InsecureServerCredentials(), &impl->port);
  b.RegisterService(&impl->service);
  b.SetMaxReceiveMessageSize(static_cast<int>(std::min<std::uint64_t>(o.max_message_bytes, INT32_MAX)));
  b.SetMaxSendMessageSize(static_cast<int>(std::min<std::uint64_t>(o.max_message_bytes, INT32_MAX)));
  b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, static_cast<int>(o.max_concurrent_streams));
  b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, static_cast<int>(o.idle_timeout.ns() / 1000000));
  b.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                       static_cast<int>(o.handshake_timeout.ns() / 1000000));
  impl->server = b.BuildAndStart();
  if (!impl->server || impl->port == 0)
    return Status(Errc::kInvalidArgument,
                  "cannot listen for gRPC on " + where + " (address in use or invalid)");
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

std::uint16_t GrpcServer::port() const noexcept { return static_cast<std::uint16_t>(impl_->port); }

GrpcStats GrpcServer::stats() const { return GrpcStats{impl_->holds.held()}; }

void GrpcServer::stop(Duration grace) {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->holds.stop();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::nanoseconds(grace.ns()));
  impl_->server->Wait();
  impl_->answerers.stop();
  trace::flush();
}

}  // namespace symphony::front
