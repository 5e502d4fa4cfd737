// Per-request stage times of the protocol front, for the breakdown in
// bench/results/front.md (bench/front_bench.py --trace).
//
// Compiled in, off by default: with the environment variable
// SYMPHONY_FRONT_TRACE=FILE set when the process starts, the transports take
// a few more clock readings per inference request (HTTP: request read,
// parsed, reply on the I/O thread, encoded, written; gRPC: handler entered,
// converted, response built, call done; a ModelStreamInfer request as
// gRPC's but its write, under "grpc_stream"), add the server's own (Reply::times:
// accepted, batch start, batch end, outcome), and keep one histogram per
// stage; each transport's stop() writes them all to FILE as JSON. Off, each
// of those places costs one predictable branch on a flag read once.
#pragma once

#include <string_view>

#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::front {

// What the service knows of a request's way through it (zero: not known).
struct ServiceTimes {
  TimePoint submitted;  // accepted by the server (Reply::latency starts here)
  TimePoint exec;       // its batch's planned start (eager: when it was dispatched)
  TimePoint finish;     // its batch's end, as the executor reported it
  TimePoint answered;   // the outcome callback ran (Reply::latency ends here)
};

namespace trace {

// Whether SYMPHONY_FRONT_TRACE was set when the process started.
bool enabled() noexcept;
inline TimePoint now() noexcept { return SteadyClock{}.now(); }

// One inference request through a transport. `received` .. `written` are the
// transport's; stages whose ends are zero are left out.
struct Transport {
  TimePoint arrived;         // HTTP: the kernel's stamp of the read that completed the request (gRPC: zero)
  TimePoint received;        // HTTP: the whole request read; gRPC: the handler runs (the message is parsed)
  TimePoint parsed;          // became an InferRequest
  TimePoint io;              // HTTP: the reply back on the connection's I/O thread (gRPC: = answered)
  TimePoint encoded;         // the response is built, about to be written / Finish()ed
  TimePoint written;         // HTTP: the write completed; gRPC: OnDone (the status went out)
  std::string_view outcome;  // of the reply (outcome_of); empty: recorded with all requests only
};
// A reply's outcome as the trace names it: ok, late, dropped, error, or
// "refused" when the server did not accept the request.
constexpr std::string_view outcome_of(bool accepted, Outcome o) noexcept {
  return accepted ? to_string(o) : std::string_view("refused");
}
void record(std::string_view transport, const Transport& t, const ServiceTimes& s) noexcept;

// Writes every histogram to the file (whole, by rename). Any thread.
void flush() noexcept;

}  // namespace trace
}  // namespace symphony::front
