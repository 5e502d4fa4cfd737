// Which scheduler is primary (see election.hpp).
#include "scheduler/election.hpp"

#include <algorithm>

namespace symphony::cluster {

Election::Election(Options o, TimePoint now) : o_(o), started_(now), peers_(o.count) {
  if (o_.count <= 1) become_primary(0);
}

void Election::on_standing(std::uint32_t from, std::uint64_t term, bool primary, TimePoint now) {
  if (from >= peers_.size() || from == o_.self) return;
  Peer& p = peers_[from];
  p.heard = true;
  p.at = now;
  p.term = term;
  p.primary = primary;
  highest_ = std::max(highest_, term);
}

void Election::on_link_lost(std::uint32_t from) {
  if (from < peers_.size() && from != o_.self) peers_[from].heard = false;
}

bool Election::on_client_term(std::uint64_t term) {
  highest_ = std::max(highest_, term);
  if (!primary_ || term <= term_) return false;
  become_primary(term);
  return true;
}

std::optional<std::uint32_t> Election::known_primary(TimePoint now) const {
  std::optional<std::uint32_t> best;
  for (std::uint32_t i = 0; i < peers_.size(); ++i)
    if (i != o_.self && alive(peers_[i], now) && peers_[i].primary &&
        (!best || peers_[i].term > peers_[*best].term))
      best = i;
  return best;
}

void Election::become_primary(std::uint64_t above) {
  primary_ = true;
  term_ = make_term(round_of(std::max(above, highest_)) + 1, o_.self);
  highest_ = term_;
}

Election::Action Election::tick(TimePoint now) {
  const std::optional<std::uint32_t> other = known_primary(now);
  if (primary_) {
    if (other && peers_[*other].term > term_) {
      primary_ = false;
      deposed_by_ = peers_[*other].term;
      return Action::kStepDown;
    }
    return Action::kNone;
  }
  if (other) return Action::kNone;
  if (now - started_ < o_.timeout) return Action::kNone;
  // No primary heard: the lowest live scheduler takes over (a lower one that
  // is alive and no primary will, once past its own start).
  for (std::uint32_t i = 0; i < o_.self && i < peers_.size(); ++i)
    if (alive(peers_[i], now)) return Action::kNone;
  become_primary(0);
  return Action::kBecomePrimary;
}

}  // namespace symphony::cluster
