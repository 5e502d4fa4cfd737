// gRPC transport: ModelInfer on the generated async stub over one channel or
// a few (round robin), with one CompletionQueue whose thread hands each
// finished call back to the runner's io thread. The request's budget is the
// call's deadline; Symphony's outcome comes as trailing metadata.
//
// A gRPC deadline is enforced by the client library too: a call whose
// deadline passes ends there with DEADLINE_EXCEEDED (and no metadata), so
// over gRPC an answer after the deadline is never seen as late; it counts as
// dropped "deadline". A request whose deadline passed before the client
// could send it is not sent (dropped "client_expired"), as over HTTP. With
// grpc_deadline off the budget goes as the `timeout` parameter instead and
// the call has no deadline: a late answer arrives, and counts late.
#include <grpcpp/grpcpp.h>

#include <boost/asio/post.hpp>

#include <atomic>
#include <map>
#include <utility>
#include <thread>

#include "inference.grpc.pb.h"
#include "symphony/front/grpc_process.hpp"
#include "transport.hpp"

namespace symphony::front::client::detail {
namespace {

namespace asio = boost::asio;

std::chrono::system_clock::time_point wall_deadline(Duration left) {
  return std::chrono::system_clock::now() + std::chrono::nanoseconds(std::max<std::int64_t>(left.ns(), 0));
}

std::string find_metadata(const std::multimap<grpc::string_ref, grpc::string_ref>& md, const char* key) {
  const auto it = md.find(key);
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

class GrpcTransport final : public Transport {
 public:
  GrpcTransport(asio::io_context& io, Endpoint ep, const TransportOptions& o) : io_(io), ep_(std::move(ep)) {
    symphony::front::set_grpc_process_defaults();
    const std::size_t n = std::max<std::size_t>(o.connections, 1);
    for (std::size_t i = 0; i < n; ++i) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      args.SetMaxSendMessageSize(-1);
      // A connection of its own per channel (channels with equal arguments share one).
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      // No transparent retries: a load generator counts what happened (and the
      // retry machinery costs CPU per call).
      args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
      args.SetInt("symphony.load.channel", static_cast<int>(i));
      channels_.push_back(
          grpc::CreateCustomChannel(ep_.authority(), grpc::InsecureChannelCredentials(), args));
      stubs_.push_back(inference::GRPCInferenceService::NewStub(channels_.back()));
    }
    connect_timeout_ = o.connect_timeout;
    deadline_ = o.grpc_deadline;
  }

  ~GrpcTransport() override { stop(); }

  Result<ModelMetadata> metadata(const std::string& model, Duration timeout) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(wall_deadline(timeout));
    inference::ModelMetadataRequest req;
    req.set_name(model);
    inference::ModelMetadataResponse resp;
    const grpc::Status st = stubs_[0]->ModelMetadata(&ctx, req, &resp);
    if (!st.ok()) {
      const std::string what = grpc_code_name(st.error_code()) + ": " + st.error_message();
      if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
          st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
        return Status(Errc::kNotFound, "cannot reach " + ep_.url + " (" + what + ")");
      if (st.error_code() == grpc::StatusCode::NOT_FOUND)
        return Status(Errc::kNotFound,
                      "model '" + model + "' is not served by " + ep_.url + " (" + what + ")");
      return Status(Errc::kFailedPrecondition, "ModelMetadata('" + model + "') on " + ep_.url + ": " + what);
    }
    ModelMetadata md;
    md.name = resp.name();
    md.platform = resp.platform();
    for (const auto& v : resp.versions()) md.versions.push_back(v);
    auto copy = [](const auto& from, std::vector<TensorMetadata>& to) {
      for (const auto& t : from) {
        TensorMetadata m;
        m.name = t.name();
        m.datatype = t.datatype();
        m.shape.assign(t.shape().begin(), t.shape().end());
        to.push_back(std::move(m));
      }
    };
    copy(resp.inputs(), md.inputs);
    copy(resp.outputs(), md.outputs);
    return md;
  }

  void add_model(const std::string& name, const ModelMetadata& md,
                 const std::vector<InputTensor>& inputs) override {
    (void)md;  // every output comes back raw
    inference::ModelInferRequest req;
    req.set_model_name(name);
    for (const InputTensor& in : inputs) {
      auto* t = req.add_inputs();
      t->set_name(in.name);
      t->set_datatype(std::string(datatype_name(in.dtype)));
      for (std::int64_t d : in.shape) t->add_shape(d);
      req.add_raw_input_contents(in.raw);
    }
    requests_.push_back(std::move(req));
  }

  void start(Done done) override {
    done_ = std::move(done);
    // Connect every channel before the first request (bounded; a failure shows in the requests).
    for (auto& ch : channels_) (void)ch->WaitForConnected(wall_deadline(connect_timeout_));
    poller_ = std::thread([this] { poll(); });
  }

  void send(Request* r) override {
    const TimePoint now = clock_.now();
    if (r->deadline <= now) {
      // Its budget went by before the client could send it (the client
      // behind its schedule): not sent, as over HTTP. A call with a deadline
      // passed would end DEADLINE_EXCEEDED as if the server dropped it, and
      // cost a client that is already behind as much as one it can send in time.
      Answer a;
      a.via = Answer::Via::kClientExpired;
      done_(r, std::move(a));
      return;
    }
    auto* c = new Call;
    c->r = r;
    inference::ModelInferRequest& req = request(r->model, r->priority);
    if (!r->deadline.is_infinite()) {
      if (deadline_)
        c->ctx.set_deadline(wall_deadline(r->deadline - now));
      else  // what is left of it, as HTTP sends it; the request is serialized at the call's start
        (*req.mutable_parameters())["timeout"].set_int64_param(
            std::max<std::int64_t>((r->deadline - now).ns() / 1000, 1));
    }
    r->written = now;
    link(c);
    auto& stub = *stubs_[next_stub_++ % stubs_.size()];
    c->reader = stub.AsyncModelInfer(&c->ctx, req, &cq_);
    c->reader->Finish(&c->resp, &c->status, c);
  }

  void abandon_all(const std::string& why) override {
    for (Call* c = head_; c; c = c->next) {
      if (c->ended) continue;
      c->ended = true;
      c->ctx.TryCancel();
      Answer a;
      a.via = Answer::Via::kNoAnswer;
      a.message = why;
      done_(c->r, std::move(a));
    }
  }

  bool quiescent() const override { return head_ == nullptr; }

  void stop() override {
    if (stopped_) return;
    stopped_ = true;
    cq_.Shutdown();
    if (poller_.joinable()) {
      poller_.join();
    } else {  // never started: drain the queue here, as gRPC asks
      void* tag = nullptr;
      bool ok = false;
      while (cq_.Next(&tag, &ok)) delete static_cast<Call*>(tag);
    }
  }

  TransportStats stats() const override {
    TransportStats s;
    s.connections_opened = channels_.size();
    s.open = channels_.size();
    s.peak_open = channels_.size();
    return s;
  }

 private:
  struct Call {
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> reader;
    Request* r = nullptr;
    bool ended = false;  // abandoned: its end is already reported
    Call* prev = nullptr;
    Call* next = nullptr;
  };

  void link(Call* c) {
    c->next = head_;
    if (head_) head_->prev = c;
    head_ = c;
  }
  void unlink(Call* c) {
    if (c->prev)
      c->prev->next = c->next;
    else
      head_ = c->next;
    if (c->next) c->next->prev = c->prev;
  }

  // The completion queue's thread: finished calls go to the io thread, all
  // that are ready at once in one hand-off (a hand-off per call costs a
  // wake-up each).
  void poll() {
    void* tag = nullptr;
    bool ok = false;
    bool open = true;
    while (open && cq_.Next(&tag, &ok)) {
      std::vector<Call*> batch{static_cast<Call*>(tag)};
      while (batch.size() < kMaxBatch) {
        const auto got = cq_.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC));
        if (got == grpc::CompletionQueue::GOT_EVENT) {
          batch.push_back(static_cast<Call*>(tag));
        } else {
          open = got != grpc::CompletionQueue::SHUTDOWN;
          break;
        }
      }
      asio::post(io_, [this, b = std::move(batch)] {
        for (Call* c : b) finished(c);
      });
    }
  }
  static constexpr std::size_t kMaxBatch = 256;

  // io thread.
  void finished(Call* c) {
    unlink(c);
    if (!c->ended) {
      Answer a;
      a.grpc = true;
      a.status = static_cast<int>(c->status.error_code());
      a.message = c->status.error_message();
      a.outcome = find_metadata(c->ctx.GetServerTrailingMetadata(), "symphony-outcome");
      a.drop_reason = find_metadata(c->ctx.GetServerTrailingMetadata(), "symphony-drop-reason");
      if (a.outcome.empty()) {  // a server may send them as initial metadata instead
        a.outcome = find_metadata(c->ctx.GetServerInitialMetadata(), "symphony-outcome");
        a.drop_reason = find_metadata(c->ctx.GetServerInitialMetadata(), "symphony-drop-reason");
      }
      // A model may answer without outputs (Symphony's emulated devices run
      // none); raw contents, when sent, come one per output.
      if (c->status.ok() && c->resp.raw_output_contents_size() != 0 &&
          c->resp.raw_output_contents_size() != c->resp.outputs_size())
        a.bad_body = "bad response: " + std::to_string(c->resp.raw_output_contents_size()) +
                     " raw_output_contents for " + std::to_string(c->resp.outputs_size()) + " outputs";
      done_(c->r, std::move(a));
    }
    delete c;
  }

  asio::io_context& io_;
  Endpoint ep_;
  Duration connect_timeout_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs_;
  std::vector<inference::ModelInferRequest> requests_;
  // A model's request with a `priority` parameter, made at its first use
  // (io thread; std::map: a request's address stays while a call uses it).
  std::map<std::pair<std::uint32_t, std::uint32_t>, inference::ModelInferRequest> with_priority_;

  inference::ModelInferRequest& request(std::uint32_t model, std::uint32_t priority) {
    if (priority == 0) return requests_[model];
    auto [it, made] = with_priority_.try_emplace({model, priority});
    if (made) {
      it->second = requests_[model];
      (*it->second.mutable_parameters())["priority"].set_uint64_param(priority);
    }
    return it->second;
  }
  grpc::CompletionQueue cq_;
  std::thread poller_;
  Done done_;
  SteadyClock clock_;
  Call* head_ = nullptr;  // calls not finished yet (io thread)
  std::size_t next_stub_ = 0;
  bool deadline_ = true;  // TransportOptions::grpc_deadline
  bool stopped_ = false;
};

}  // namespace

std::unique_ptr<Transport> make_grpc_transport(asio::io_context& io, const Endpoint& ep,
                                               const TransportOptions& o) {
  return std::make_unique<GrpcTransport>(io, ep, o);
}

}  // namespace symphony::front::client::detail
