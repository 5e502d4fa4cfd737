#include "scheduler/delay_learner.hpp"

#include <algorithm>

namespace symphony::cluster {
namespace {

std::string us(Duration d) { return std::to_string(d.ns() / 1000) + " us"; }

// More than 5 % and more than 5 us apart.
bool moved(Duration a, Duration b) {
  const Duration diff = a > b ? a - b : b - a;
  return diff > Duration::microseconds(5) && diff.ns() * 20 > max(a, b).ns();
}

}  // namespace

DelayLearner::DelayLearner(Options o, std::function<void(const std::string&)> log)
    : o_(o),
      log_(std::move(log)),
      ctrl_(o.window, o.max_age),
      resp_(o.window, o.max_age),
      data_(o.window, o.max_age) {
  learned_.delays = o_.floors;
}

void DelayLearner::on_batch(TimePoint now, Duration one_way, std::uint32_t executed, Duration fetch,
                            Duration push) {
  ctrl_.add(now, one_way);
  if (executed > 0) data_.add(now, executed, fetch);
  resp_.add(now, push + one_way);
}

std::optional<Delays> DelayLearner::update(TimePoint now) {
  const double q = o_.percentile;
  const Delays& floors = o_.floors;
  Delays d = floors;
  if (o_.learn) {
    // delay(b) = d_ctrl + d_data * b: the fixed part of a batch's reads goes
    // to d_ctrl, the part that grows with b to d_data.
    const BatchCostFit::Fit reads = data_.fit(q, now);
    d.ctrl = max(floors.ctrl, ctrl_.percentile(q, now) + reads.fixed);
    d.data = max(floors.data, reads.per_item);
    d.resp = max(floors.resp, resp_.percentile(q, now));
    // A cap: a few slow outliers in a thin window (a paused process, a
    // loaded host) must not make every model unservable. Planning for more
    // than a quarter of the tightest SLO in d_ctrl and d_resp would drop
    // nearly every request as infeasible; beyond it requests run and may be
    // late, which the frontends report.
    const Duration cap = max(o_.tightest_slo / 4, max(floors.ctrl, floors.resp));
    if (d.ctrl > cap || d.resp > cap) {
      if (!capped_logged_ || o_.verbose)
        log_("learned delays d_ctrl " + us(d.ctrl) + " / d_resp " + us(d.resp) + " capped at " + us(cap) +
             " (a quarter of the tightest SLO)");
      capped_logged_ = true;
      d.ctrl = min(d.ctrl, cap);
      d.resp = min(d.resp, cap);
    }
  }
  Delays old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = learned_.delays;
    learned_.samples = ctrl_.total();
  }
  if (!moved(d.ctrl, old.ctrl) && !moved(d.data, old.data) && !moved(d.resp, old.resp)) return std::nullopt;
  if (o_.verbose)
    log_("delays now d_ctrl " + us(d.ctrl) + ", d_data " + us(d.data) + " per request, d_resp " + us(d.resp) +
         " (p" + std::to_string(static_cast<int>(q * 100)) + " of " + std::to_string(ctrl_.recent(now)) +
         " recent samples)");
  return d;
}

void DelayLearner::commit(const Delays& d) {
  std::lock_guard<std::mutex> lock(mu_);
  learned_.delays = d;
}

DelayLearner::Learned DelayLearner::learned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return learned_;
}

}  // namespace symphony::cluster
