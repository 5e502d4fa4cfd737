// Which scheduler of cluster.schedulers is primary: a pure state machine over explicit time points, fed
// by what the node hears from the other schedulers (wire::Standing every heartbeat interval). Private
// to the scheduler; no transport. The rules: (docs/architecture.md#hot-spares),
// (docs/cluster.md#hot-spare-schedulers).
//
// Guarantees: of several spares that hear no live primary and no lower-index scheduler exactly one
// takes over, at once, but never during the first heartbeat timeout after its start; terms
// ((round << 8) | index) are unique per scheduler and ordered by round; a primary that hears a primary
// of a higher term steps down (the node exits), of a lower term ignores it.
//
//   Election e({.self = 1, .count = 3, .timeout = 750ms}, now);
//   e.on_standing(0, term, /*primary=*/true, now);   // every Standing heard
//   e.on_link_lost(0, now);                          // a link to scheduler 0 failed
//   switch (e.tick(now)) { case Election::Action::kBecomePrimary: ...; case kStepDown: ... }
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "symphony/time.hpp"

namespace symphony::cluster {

class Election {
 public:
  struct Options {
    std::uint32_t self = 0;   // this scheduler's index in cluster.schedulers
    std::uint32_t count = 1;  // schedulers in the list (1: primary at once, no election)
    Duration timeout = Duration::milliseconds(750);  // the heartbeat timeout
  };
  enum class Action : std::uint8_t { kNone, kBecomePrimary, kStepDown };

  static constexpr std::uint64_t make_term(std::uint64_t round, std::uint32_t index) {
    return (round << 8) | (index & 0xFF);
  }
  static constexpr std::uint64_t round_of(std::uint64_t term) { return term >> 8; }

  Election(Options o, TimePoint now);

  // ---- events ------------------------------------------------------------------------

  // Scheduler `from` says it holds `term` and is (or is not) primary.
  void on_standing(std::uint32_t from, std::uint64_t term, bool primary, TimePoint now);
  // The link to scheduler `from` failed: not heard until its next Standing.
  void on_link_lost(std::uint32_t from);
  // A frontend or backend remembers `term`: a primary below it moves above it.
  // Returns whether this primary's term changed.
  bool on_client_term(std::uint64_t term);
  // What to do now (a spare taking over, a primary stepping down); the
  // change is made before it returns.
  Action tick(TimePoint now);

  // ---- state -------------------------------------------------------------------------

  bool primary() const noexcept { return primary_; }
  std::uint64_t term() const noexcept { return term_; }
  // The primary this spare hears (the highest term), or nullopt.
  std::optional<std::uint32_t> known_primary(TimePoint now) const;
  // The highest term heard from a primary other than this one (0: none).
  std::uint64_t deposed_by() const noexcept { return deposed_by_; }

 private:
  struct Peer {
    bool heard = false;  // a Standing since the last link loss
    TimePoint at;        // of the last Standing
    std::uint64_t term = 0;
    bool primary = false;
  };
  bool alive(const Peer& p, TimePoint now) const { return p.heard && now - p.at <= o_.timeout; }
  void become_primary(std::uint64_t above);

  const Options o_;
  const TimePoint started_;
  std::vector<Peer> peers_;
  bool primary_ = false;
  std::uint64_t term_ = 0;
  std::uint64_t highest_ = 0;  // the highest term heard anywhere
  std::uint64_t deposed_by_ = 0;
};

}  // namespace symphony::cluster
