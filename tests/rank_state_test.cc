// RankState on its own: matchmaking, waiting, the GPU timer, expiry,
// saturation and free-time corrections, driven message by message.
#include "symphony/rank_state.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace symphony {
namespace {

using namespace symphony::literals;

TimePoint at(Duration d) { return TimePoint::epoch() + d; }

CandidateUpdate cand(std::uint32_t b, Duration exec, Duration latest, Duration delay = 0_ms) {
  return {true, true, Candidate{b, at(exec), at(latest), delay}};
}

GrantResult dispatched(BatchId id, Duration free, Duration len, CandidateUpdate next = {true, false, {}}) {
  return {true, id, at(free), len, next};
}

class RankStateTest : public ::testing::Test {
 protected:
  explicit RankStateTest(std::uint32_t gpus = 3, std::uint32_t outstanding = 4)
      : rank_(RankConfig{4, gpus, outstanding}) {
    for (ModelId m = 0; m < 4; ++m) EXPECT_TRUE(rank_.add_model(m).ok());
    for (std::uint32_t g = 0; g < gpus; ++g) EXPECT_EQ(*rank_.add_gpu(at(0_ms)), g);
  }

  // Fires every timer due at `now`; returns the actions.
  std::vector<RankAction> fire(Duration now) {
    std::vector<RankAction> out;
    while (rank_.fire_one(at(now))) {
      RankAction a;
      while (rank_.pop_action(a)) out.push_back(a);
      EXPECT_EQ(rank_.check_invariants(at(now)), "");
    }
    return out;
  }
  void check(Duration now) { EXPECT_EQ(rank_.check_invariants(at(now)), ""); }

  RankState<> rank_;
};

TEST_F(RankStateTest, ModelTimerGrantsTheLowestIdIdleGpu) {
  rank_.on_candidate(0, cand(4, 10_ms, 12_ms), at(0_ms));
  check(0_ms);
  EXPECT_TRUE(fire(9_ms).empty());
  auto a = fire(10_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kGrant);
  EXPECT_EQ(a[0].model, 0u);
  EXPECT_EQ(a[0].gpu, 0u);
  EXPECT_EQ(rank_.gpu_state(0), RankGpuState::kReserved);
  rank_.on_grant_result(0, 0, dispatched(1, 19_ms, 9_ms), at(10_ms));
  check(10_ms);
  EXPECT_EQ(rank_.gpu_free(0), at(19_ms));
  // The next candidate gets GPU 1, the lowest idle one.
  rank_.on_candidate(1, cand(2, 11_ms, 15_ms), at(10_ms));
  a = fire(11_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].gpu, 1u);
}

TEST_F(RankStateTest, BusyGpuThatFreesByExecIsGranted) {
  // Occupy all three GPUs until 20, 30, 40 ms.
  const Duration frees[] = {20_ms, 30_ms, 40_ms};
  for (GpuId g = 0; g < 3; ++g) {
    rank_.on_candidate(g, cand(1, 0_ms, 5_ms), at(0_ms));
    auto a = fire(0_ms);
    ASSERT_EQ(a.size(), 1u);
    rank_.on_grant_result(a[0].model, a[0].gpu, dispatched(g + 1, frees[g], 10_ms), at(0_ms));
  }
  rank_.on_candidate(3, cand(4, 25_ms, 28_ms), at(1_ms));
  auto a = fire(25_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].gpu, 0u);  // GPU 0 freed at 20 <= 25
  EXPECT_EQ(a[0].time, at(20_ms));
}

TEST_F(RankStateTest, WaitingCandidatesAreGrantedMostUrgentFirstByTheGpuTimer) {
  for (GpuId g = 0; g < 3; ++g) {
    rank_.on_candidate(g, cand(1, 0_ms, 5_ms), at(0_ms));
    auto a = fire(0_ms);
    rank_.on_grant_result(a[0].model, a[0].gpu, dispatched(g + 1, Duration::milliseconds(20 + 10 * g), 10_ms),
                          at(0_ms));
  }
  EXPECT_FALSE(rank_.gpu_timer_armed());
  // Two candidates want to run at 10 ms; no GPU frees by then: both wait.
  rank_.on_candidate(0, cand(3, 10_ms, 26_ms), at(5_ms));
  rank_.on_candidate(1, cand(2, 10_ms, 23_ms), at(5_ms));
  EXPECT_TRUE(fire(10_ms).empty());
  EXPECT_EQ(rank_.waiting_size(), 2u);
  EXPECT_EQ(rank_.model_state(0), RankModelState::kWaiting);
  ASSERT_TRUE(rank_.gpu_timer_armed());
  EXPECT_EQ(rank_.gpu_timer_target(), 0u);  // frees earliest, at 20
  EXPECT_EQ(rank_.gpu_timer_time(), at(20_ms));
  // At 20 ms GPU 0 goes to the most urgent one (latest 23), then GPU 1's
  // timer waits for 30 ms, after model 0's latest (26): model 0 expires first.
  auto a = fire(20_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].model, 1u);
  EXPECT_EQ(a[0].gpu, 0u);
  rank_.on_grant_result(1, 0, dispatched(9, 24_ms, 4_ms), at(20_ms));
  check(20_ms);
  EXPECT_EQ(rank_.gpu_timer_target(), 0u);  // GPU 0 again, now free at 24
  a = fire(24_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].model, 0u);  // 24 <= latest 26
}

TEST_F(RankStateTest, ExpiredWaitingCandidateIsRecomputedNotDiscarded) {
  for (GpuId g = 0; g < 3; ++g) {
    rank_.on_candidate(g, cand(1, 0_ms, 5_ms), at(0_ms));
    auto a = fire(0_ms);
    rank_.on_grant_result(a[0].model, a[0].gpu, dispatched(g + 1, 50_ms, 10_ms), at(0_ms));
  }
  rank_.on_candidate(3, cand(4, 10_ms, 12_ms, 1_ms), at(0_ms));
  EXPECT_TRUE(fire(9_ms).empty());  // exec - delay = 9: waits (no GPU before 50)
  EXPECT_EQ(rank_.model_state(3), RankModelState::kWaiting);
  EXPECT_TRUE(fire(11_ms).empty());  // still valid: expires after latest - delay = 11
  auto a = fire(Duration::nanoseconds(11'000'001));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kRecompute);
  EXPECT_EQ(a[0].model, 3u);
  EXPECT_EQ(a[0].time, at(50_ms));  // the earliest any GPU can start
  EXPECT_EQ(rank_.model_state(3), RankModelState::kIdle);
  EXPECT_FALSE(rank_.gpu_timer_armed());
}

TEST_F(RankStateTest, GpuTimerSendsBackCandidatesThatCannotMeetTheEarliestGpu) {
  for (GpuId g = 0; g < 3; ++g) {
    rank_.on_candidate(g, cand(1, 0_ms, 5_ms), at(0_ms));
    auto a = fire(0_ms);
    rank_.on_grant_result(a[0].model, a[0].gpu, dispatched(g + 1, 30_ms, 10_ms), at(0_ms));
  }
  rank_.on_candidate(0, cand(4, 10_ms, 40_ms), at(0_ms));
  fire(10_ms);
  // A finish reported early makes GPU 2 free at 12 ms; the other candidate
  // waits with latest 11: it cannot start by then and is sent back.
  rank_.on_candidate(1, cand(4, 10_ms, 11_ms), at(10_ms));
  fire(10_ms);
  ASSERT_EQ(rank_.waiting_size(), 2u);
  rank_.on_batch_finished(2, 3, at(12_ms), at(10_ms));
  check(10_ms);
  EXPECT_EQ(rank_.gpu_timer_target(), 2u);
  auto a = fire(12_ms);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kRecompute);
  EXPECT_EQ(a[0].model, 1u);
  EXPECT_EQ(a[1].kind, RankAction::Kind::kGrant);
  EXPECT_EQ(a[1].model, 0u);
  EXPECT_EQ(a[1].gpu, 2u);
}

class SaturatingRankStateTest : public RankStateTest {
 protected:
  SaturatingRankStateTest() : RankStateTest(1, 1) {}
};

TEST_F(SaturatingRankStateTest, GpuWithTooManyUnfinishedBatchesTakesNoGrant) {
  rank_.on_candidate(0, cand(1, 0_ms, 5_ms), at(0_ms));
  auto a = fire(0_ms);
  rank_.on_grant_result(0, 0, dispatched(7, 6_ms, 6_ms), at(0_ms));
  EXPECT_EQ(rank_.gpu_state(0), RankGpuState::kSaturated);
  rank_.on_candidate(1, cand(1, 6_ms, 20_ms), at(1_ms));
  EXPECT_TRUE(fire(6_ms).empty());  // GPU 0 predicted free at 6 but unfinished
  EXPECT_EQ(rank_.model_state(1), RankModelState::kWaiting);
  EXPECT_FALSE(rank_.gpu_timer_armed());
  // It really ends at 8 ms: GPU 0 is idle again and goes to the waiting model.
  rank_.on_batch_finished(0, 7, at(8_ms), at(8_ms));
  EXPECT_EQ(rank_.gpu_free(0), at(8_ms));
  a = fire(8_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].model, 1u);
}

TEST_F(RankStateTest, RetiredGpuIsNeverGrantedAndLeavesWhenItsBatchesEnd) {
  // GPU 0 runs a batch, GPU 1 is reserved by a grant in flight; then both
  // hosts are lost, and the idle GPU 2 as well.
  rank_.on_candidate(0, cand(1, 0_ms, 5_ms), at(0_ms));
  auto a = fire(0_ms);
  ASSERT_EQ(a.size(), 1u);
  rank_.on_grant_result(0, 0, dispatched(1, 6_ms, 6_ms), at(0_ms));
  rank_.on_candidate(1, cand(1, 0_ms, 5_ms), at(0_ms));
  a = fire(0_ms);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(a[0].gpu, 1u);
  ASSERT_TRUE(rank_.retire_gpu(0, at(1_ms)).ok());
  ASSERT_TRUE(rank_.retire_gpu(1, at(1_ms)).ok());
  ASSERT_TRUE(rank_.retire_gpu(2, at(1_ms)).ok());
  ASSERT_TRUE(rank_.retire_gpu(2, at(1_ms)).code() == Errc::kNotFound);  // already gone: it was idle
  EXPECT_EQ(rank_.gpu_state(0), RankGpuState::kRetiring);
  EXPECT_EQ(rank_.gpu_state(1), RankGpuState::kReserved);
  EXPECT_EQ(rank_.gpu_state(2), RankGpuState::kAbsent);
  check(1_ms);
  // The grant in flight is answered: GPU 1 keeps that batch, takes no more.
  rank_.on_grant_result(1, 1, dispatched(2, 7_ms, 6_ms), at(1_ms));
  EXPECT_EQ(rank_.gpu_state(1), RankGpuState::kRetiring);
  check(1_ms);
  // A new candidate finds no GPU at all: it waits, and no GPU timer is armed.
  rank_.on_candidate(2, cand(1, 2_ms, 30_ms), at(1_ms));
  EXPECT_TRUE(fire(2_ms).empty());
  EXPECT_EQ(rank_.model_state(2), RankModelState::kWaiting);
  EXPECT_FALSE(rank_.gpu_timer_armed());
  // Their batches are reported (with an error, by the owner): they leave.
  rank_.on_batch_finished(0, 1, at(3_ms), at(3_ms));
  rank_.on_batch_finished(1, 2, at(3_ms), at(3_ms));
  EXPECT_EQ(rank_.gpu_state(0), RankGpuState::kAbsent);
  EXPECT_EQ(rank_.gpu_state(1), RankGpuState::kAbsent);
  EXPECT_EQ(rank_.num_gpus(), 0u);
  check(3_ms);
  // A new GPU (the restarted host) takes the lowest id and the waiting model.
  EXPECT_EQ(*rank_.add_gpu(at(4_ms)), 0u);
  a = fire(4_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].model, 2u);
  EXPECT_EQ(a[0].gpu, 0u);
}

TEST_F(RankStateTest, RemovingBusyGpusAndModelsWithCandidatesFails) {
  rank_.on_candidate(0, cand(1, 0_ms, 5_ms), at(0_ms));
  EXPECT_EQ(rank_.remove_model(0).code(), Errc::kFailedPrecondition);
  auto a = fire(0_ms);
  rank_.on_grant_result(0, 0, dispatched(1, 6_ms, 6_ms), at(0_ms));
  EXPECT_EQ(rank_.remove_gpu(0, at(1_ms)).code(), Errc::kFailedPrecondition);
  EXPECT_TRUE(rank_.remove_model(0).ok());
  EXPECT_TRUE(rank_.remove_gpu(1, at(1_ms)).ok());
  EXPECT_EQ(rank_.num_gpus(), 2u);
  EXPECT_EQ(*rank_.add_gpu(at(1_ms)), 1u);  // the lowest free id again
  rank_.on_batch_finished(0, 1, at(6_ms), at(6_ms));
  EXPECT_TRUE(rank_.remove_gpu(0, at(6_ms)).ok());
}

// ---- models restricted to some GPUs (ModelConfig::gpus) -------------------------

class RestrictedRankStateTest : public RankStateTest {
 protected:
  void restrict(ModelId m, std::vector<GpuId> gpus) {
    ASSERT_TRUE(rank_.remove_model(m).ok());
    ASSERT_TRUE(rank_.add_model(m, gpus).ok());
  }
  // Model m runs a batch of one on the GPU it is granted at `now`, until `free`.
  void occupy(ModelId m, Duration now, Duration free) {
    rank_.on_candidate(m, cand(1, now, now + 1_ms), at(now));
    auto a = fire(now);
    ASSERT_EQ(a.size(), 1u);
    rank_.on_grant_result(m, a[0].gpu, dispatched(++batch_, free, free - now), at(now));
    check(now);
  }
  BatchId batch_ = 0;
};

TEST_F(RestrictedRankStateTest, OnlyCandidatesThatMayUseTheGpuHoldALeaseBack) {
  restrict(0, {1});
  rank_.on_candidate(0, cand(1, 1_ms, 2_ms), at(0_ms));  // urgent, but not on GPU 0
  ASSERT_TRUE(rank_.request_lease(0, 10_ms, at(1000_ms), at(0_ms)).ok());
  auto a = fire(0_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kLease);
  a = fire(1_ms);  // and the model still gets its own GPU
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kGrant);
  EXPECT_EQ(a[0].gpu, 1u);
  ASSERT_TRUE(rank_.end_lease(0, at(5_ms), at(5_ms)).ok());
  check(5_ms);
}

TEST_F(RestrictedRankStateTest, ModelTimerGrantsTheLowestIdIdleGpuTheModelMayUse) {
  restrict(0, {2, 1});
  rank_.on_candidate(0, cand(4, 10_ms, 12_ms), at(0_ms));
  auto a = fire(10_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].gpu, 1u);  // GPU 0 is idle too, but not the model's
}

TEST_F(RestrictedRankStateTest, AModelWaitsForItsOwnGpuWhileOthersAreIdle) {
  restrict(1, {1});
  occupy(0, 0_ms, 20_ms);  // GPU 0
  occupy(2, 0_ms, 20_ms);  // GPU 1
  // Model 1 wants to start at 10; only GPU 1 is its own, busy until 20.
  rank_.on_candidate(1, cand(2, 10_ms, 30_ms, 2_ms), at(5_ms));
  EXPECT_TRUE(fire(8_ms).empty());
  EXPECT_EQ(rank_.model_state(1), RankModelState::kWaiting);
  // GPU 2 is idle and next for everyone else: the GPU timer is not for model 1.
  EXPECT_FALSE(rank_.gpu_timer_armed());
  EXPECT_EQ(rank_.model_timer_time(1), at(18_ms));  // GPU 1 frees at 20, delay 2
  check(8_ms);
  EXPECT_TRUE(fire(17_ms).empty());
  auto a = fire(18_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kGrant);
  EXPECT_EQ(a[0].model, 1u);
  EXPECT_EQ(a[0].gpu, 1u);
  EXPECT_EQ(a[0].time, at(20_ms));
}

TEST_F(RestrictedRankStateTest, TheMoreUrgentCandidateWinsAGpuBothMayUse) {
  restrict(1, {0});
  occupy(0, 0_ms, 20_ms);  // GPU 0
  occupy(2, 0_ms, 30_ms);  // GPU 1
  occupy(3, 0_ms, 40_ms);  // GPU 2
  // Model 1 (GPU 0 only, latest 40) and model 0 (any GPU, latest 25) wait.
  rank_.on_candidate(1, cand(2, 10_ms, 40_ms), at(5_ms));
  rank_.on_candidate(0, cand(2, 10_ms, 25_ms), at(5_ms));
  EXPECT_TRUE(fire(10_ms).empty());
  EXPECT_EQ(rank_.waiting_size(), 2u);
  EXPECT_EQ(rank_.gpu_timer_target(), 0u);
  auto a = fire(20_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].model, 0u);  // latest 25 before 40
  EXPECT_EQ(a[0].gpu, 0u);
  rank_.on_grant_result(0, 0, dispatched(60, 24_ms, 4_ms), at(20_ms));
  check(20_ms);
  // GPU 0 frees at 24, before GPU 1: it goes to model 1 then.
  EXPECT_EQ(rank_.gpu_timer_target(), 0u);
  a = fire(24_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].model, 1u);
  EXPECT_EQ(a[0].gpu, 0u);
}

TEST_F(RestrictedRankStateTest, AnUnrestrictedCandidateDoesNotTakeTheOnlyGpuOfAnother) {
  restrict(1, {1});
  occupy(0, 0_ms, 20_ms);                                  // GPU 0
  occupy(2, 0_ms, 30_ms);                                  // GPU 1
  occupy(3, 0_ms, 40_ms);                                  // GPU 2
  rank_.on_candidate(1, cand(2, 10_ms, 50_ms), at(5_ms));  // GPU 1 only, at 30
  rank_.on_candidate(0, cand(2, 10_ms, 45_ms), at(5_ms));  // any: GPU 0 at 20
  EXPECT_TRUE(fire(10_ms).empty());
  EXPECT_EQ(rank_.model_timer_time(1), at(30_ms));
  auto a = fire(20_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].model, 0u);
  EXPECT_EQ(a[0].gpu, 0u);
  rank_.on_grant_result(0, 0, dispatched(61, 60_ms, 40_ms), at(20_ms));
  a = fire(30_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].model, 1u);
  EXPECT_EQ(a[0].gpu, 1u);
}

TEST_F(RestrictedRankStateTest, AnExpiredRestrictedCandidateIsRecomputedForItsOwnGpus) {
  restrict(3, {2});
  occupy(0, 0_ms, 20_ms);
  occupy(1, 0_ms, 20_ms);
  occupy(2, 0_ms, 50_ms);  // GPU 2
  rank_.on_candidate(3, cand(4, 10_ms, 12_ms, 1_ms), at(0_ms));
  EXPECT_TRUE(fire(9_ms).empty());
  EXPECT_EQ(rank_.model_state(3), RankModelState::kWaiting);
  auto a = fire(Duration::nanoseconds(11'000'001));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kRecompute);
  EXPECT_EQ(a[0].time, at(50_ms));  // its GPU's free time, not GPU 0's (20)
}

// set_model_gpus while a candidate waits: restricted to no GPU it keeps
// waiting with all three idle; allowed one, it gets that one at once; made
// unrestricted, it takes the GPU that frees first.
TEST_F(RestrictedRankStateTest, AWaitingCandidateFollowsTheGpusItIsGiven) {
  ASSERT_TRUE(rank_.set_model_gpus(0, std::span<const GpuId>{}, at(0_ms)).ok());
  rank_.on_candidate(0, cand(2, 10_ms, 30_ms), at(0_ms));
  EXPECT_TRUE(fire(10_ms).empty());
  EXPECT_EQ(rank_.model_state(0), RankModelState::kWaiting);
  EXPECT_FALSE(rank_.gpu_timer_armed()) << "no GPU may take it";
  check(10_ms);
  const std::vector<GpuId> two{2};
  ASSERT_TRUE(rank_.set_model_gpus(0, std::span<const GpuId>(two), at(11_ms)).ok());
  check(11_ms);
  auto a = fire(11_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kGrant);
  EXPECT_EQ(a[0].gpu, 2u) << "GPUs 0 and 1 are idle too, but not its";
  rank_.on_grant_result(0, 2, dispatched(1, 40_ms, 29_ms), at(11_ms));
  check(11_ms);

  occupy(2, 12_ms, 50_ms);  // GPU 0
  occupy(3, 12_ms, 45_ms);  // GPU 1
  const std::vector<GpuId> zero{0};
  ASSERT_TRUE(rank_.set_model_gpus(1, std::span<const GpuId>(zero), at(12_ms)).ok());
  rank_.on_candidate(1, cand(2, 20_ms, 60_ms), at(12_ms));
  EXPECT_TRUE(fire(20_ms).empty());
  EXPECT_EQ(rank_.model_timer_time(1), at(50_ms)) << "waits for GPU 0";
  ASSERT_TRUE(rank_.set_model_gpus(1, std::nullopt, at(21_ms)).ok());
  check(21_ms);
  EXPECT_TRUE(fire(39_ms).empty());
  a = fire(40_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].model, 1u);
  EXPECT_EQ(a[0].gpu, 2u) << "any GPU now: GPU 2 frees first (40, before 45 and 50)";
  EXPECT_EQ(rank_.set_model_gpus(9, std::nullopt, at(41_ms)).code(), Errc::kNotFound);
  EXPECT_EQ(
      rank_.set_model_gpus(0, std::span<const GpuId>(std::vector<GpuId>{7}.data(), 1), at(41_ms)).code(),
      Errc::kInvalidArgument);
}

TEST_F(RestrictedRankStateTest, AGpuTheModelMayUseThatIsNotAddedIsNeverGranted) {
  RankState<> rank(RankConfig{1, 4, 1});
  EXPECT_EQ(rank.add_model(0, std::vector<GpuId>{4}).code(), Errc::kInvalidArgument);  // beyond max_gpus
  ASSERT_TRUE(rank.add_model(0, std::vector<GpuId>{3}).ok());
  ASSERT_TRUE(rank.add_gpu(at(0_ms)).ok());
  rank.on_candidate(0, cand(1, 1_ms, 3_ms), at(0_ms));
  RankAction a;
  EXPECT_TRUE(rank.fire_one(at(1_ms)));
  EXPECT_FALSE(rank.pop_action(a));
  EXPECT_EQ(rank.model_state(0), RankModelState::kWaiting);
  EXPECT_FALSE(rank.gpu_timer_armed());
  EXPECT_EQ(rank.check_invariants(at(1_ms)), "");
  EXPECT_TRUE(rank.fire_one(at(4_ms)));  // expired: recomputed from now
  ASSERT_TRUE(rank.pop_action(a));
  EXPECT_EQ(a.kind, RankAction::Kind::kRecompute);
  EXPECT_EQ(a.time, at(4_ms));
  // GPU 3 joins: the model's next candidate gets it.
  for (GpuId g = 1; g <= 3; ++g) ASSERT_EQ(*rank.add_gpu(at(4_ms)), g);
  rank.on_candidate(0, cand(1, 5_ms, 7_ms), at(4_ms));
  EXPECT_TRUE(rank.fire_one(at(5_ms)));
  ASSERT_TRUE(rank.pop_action(a));
  EXPECT_EQ(a.kind, RankAction::Kind::kGrant);
  EXPECT_EQ(a.gpu, 3u);
}

// Leases: one GPU that takes one batch at a time, as a CPU device.
class LeaseTest : public RankStateTest {
 protected:
  LeaseTest() : RankStateTest(1, 1) {}
  static constexpr Duration kForce = 1000_ms;
  std::vector<RankAction> leases(const std::vector<RankAction>& a) {
    std::vector<RankAction> out;
    for (const RankAction& x : a)
      if (x.kind == RankAction::Kind::kLease) out.push_back(x);
    return out;
  }
};

TEST_F(LeaseTest, AnIdleGpuIsLeasedAtOnceAndCandidatesWaitUntilItEnds) {
  ASSERT_TRUE(rank_.request_lease(0, 10_ms, at(kForce), at(0_ms)).ok());
  auto a = fire(0_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kLease);
  EXPECT_EQ(a[0].gpu, 0u);
  EXPECT_EQ(rank_.gpu_state(0), RankGpuState::kLeased);
  EXPECT_TRUE(rank_.lease_held(0));
  rank_.on_candidate(0, cand(1, 5_ms, 20_ms), at(1_ms));
  EXPECT_TRUE(fire(5_ms).empty());  // no GPU for it: it waits
  EXPECT_EQ(rank_.model_state(0), RankModelState::kWaiting);
  ASSERT_TRUE(rank_.end_lease(0, at(8_ms), at(8_ms)).ok());
  check(8_ms);
  a = fire(8_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kGrant);
  EXPECT_EQ(a[0].time, at(8_ms));
  EXPECT_FALSE(rank_.lease_held(0));
}

TEST_F(LeaseTest, ACandidateWithRoomAfterTheLeaseDoesNotHoldItBack) {
  rank_.on_candidate(0, cand(1, 5_ms, 30_ms), at(0_ms));
  ASSERT_TRUE(rank_.request_lease(0, 10_ms, at(kForce), at(0_ms)).ok());
  EXPECT_EQ(leases(fire(0_ms)).size(), 1u);  // 0 + 10 <= 30: room after it
}

TEST_F(LeaseTest, ACandidateThatMustStartDuringTheLeaseGoesFirst) {
  rank_.on_candidate(0, cand(2, 5_ms, 8_ms, 1_ms), at(0_ms));
  ASSERT_TRUE(rank_.request_lease(0, 10_ms, at(kForce), at(0_ms)).ok());
  EXPECT_TRUE(fire(0_ms).empty());  // 0 + 10 > 8 - 1
  auto a = fire(4_ms);              // the candidate's timer (exec - delay)
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kGrant);
  rank_.on_grant_result(0, 0, dispatched(1, 9_ms, 4_ms), at(4_ms));
  EXPECT_TRUE(fire(9_ms).empty());  // predicted free, not yet reported
  rank_.on_batch_finished(0, 1, at(10_ms), at(10_ms));
  a = fire(10_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kLease);
  EXPECT_EQ(a[0].time, at(10_ms));
}

TEST_F(LeaseTest, AfterItsWaitALeaseIsGrantedOnceTheRunningBatchEnds) {
  // A batch runs until 30; a lease of unknown length is asked for, forced at 10.
  rank_.on_candidate(0, cand(1, 0_ms, 5_ms), at(0_ms));
  auto a = fire(0_ms);
  ASSERT_EQ(a.size(), 1u);
  rank_.on_grant_result(0, 0, dispatched(1, 30_ms, 30_ms), at(0_ms));
  ASSERT_TRUE(rank_.request_lease(0, Duration::infinite(), at(10_ms), at(1_ms)).ok());
  EXPECT_TRUE(fire(1_ms).empty());
  // A candidate that would have the GPU at 30 waits: from 10 the GPU takes no grant.
  rank_.on_candidate(1, cand(1, 12_ms, 40_ms), at(2_ms));
  EXPECT_TRUE(fire(10_ms).empty());
  EXPECT_EQ(rank_.gpu_state(0), RankGpuState::kLeased);
  EXPECT_TRUE(fire(12_ms).empty());
  EXPECT_EQ(rank_.model_state(1), RankModelState::kWaiting);
  rank_.on_batch_finished(0, 1, at(29_ms), at(29_ms));
  a = fire(29_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kLease);
  // The lease ran long: the waiting candidate, past its latest start, is recomputed.
  ASSERT_TRUE(rank_.end_lease(0, at(45_ms), at(45_ms)).ok());
  a = fire(45_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kRecompute);
  EXPECT_EQ(a[0].time, at(45_ms));
}

// The server's loads ask with force_at infinite (a run never takes the
// device from the schedule) and withdraw the lease when no gap came in time.
TEST_F(LeaseTest, ANeverForcedLeaseWaitsOutEveryCandidateAndCanBeWithdrawn) {
  const TimePoint never = TimePoint::infinite();
  ASSERT_TRUE(rank_.request_lease(0, 10_ms, never, at(0_ms)).ok());
  // Candidates keep needing the GPU within 10 ms of every free moment: each
  // is granted, the lease never is, however long it has waited.
  rank_.on_candidate(0, cand(1, 2_ms, 5_ms), at(0_ms));
  for (int i = 0; i < 50; ++i) {
    const Duration t = Duration::milliseconds(10 * i);
    auto a = fire(t + 2_ms);
    ASSERT_EQ(a.size(), 1u) << i;
    EXPECT_EQ(a[0].kind, RankAction::Kind::kGrant) << i;
    rank_.on_grant_result(0, 0, dispatched(i + 1, t + 6_ms, 4_ms), at(t + 2_ms));
    rank_.on_batch_finished(0, i + 1, at(t + 6_ms), at(t + 6_ms));
    rank_.on_candidate(0, cand(1, t + 12_ms, t + 15_ms), at(t + 6_ms));  // must start before 6 + 10
    EXPECT_TRUE(leases(fire(t + 6_ms)).empty()) << i;
    EXPECT_EQ(rank_.gpu_state(0), RankGpuState::kIdle) << i;
  }
  // Withdrawn: the GPU serves as before.
  ASSERT_TRUE(rank_.end_lease(0, at(500_ms), at(500_ms)).ok());
  EXPECT_FALSE(rank_.lease_held(0));
  auto a = fire(502_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kGrant);
}

TEST_F(LeaseTest, ANeverForcedLeaseTakesTheFirstGapLongEnough) {
  ASSERT_TRUE(rank_.request_lease(0, 10_ms, TimePoint::infinite(), at(0_ms)).ok());
  rank_.on_candidate(0, cand(1, 2_ms, 5_ms), at(0_ms));
  EXPECT_TRUE(leases(fire(0_ms)).empty());  // must start by 5, before 0 + 10
  auto a = fire(2_ms);
  ASSERT_EQ(a.size(), 1u);
  rank_.on_grant_result(0, 0, dispatched(1, 6_ms, 4_ms), at(2_ms));
  rank_.on_batch_finished(0, 1, at(6_ms), at(6_ms));
  rank_.on_candidate(0, cand(1, 20_ms, 30_ms), at(6_ms));  // room: 6 + 10 <= 30
  a = leases(fire(6_ms));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].time, at(6_ms));
}

TEST_F(LeaseTest, OneLeasePerGpuOnAGpuThatExists) {
  EXPECT_EQ(rank_.request_lease(3, 1_ms, at(kForce), at(0_ms)).code(), Errc::kNotFound);
  EXPECT_EQ(rank_.end_lease(3, at(0_ms), at(0_ms)).code(), Errc::kNotFound);
  EXPECT_EQ(rank_.end_lease(0, at(0_ms), at(0_ms)).code(), Errc::kNotFound);
  ASSERT_TRUE(rank_.request_lease(0, 1_ms, at(kForce), at(0_ms)).ok());
  EXPECT_EQ(rank_.request_lease(0, 1_ms, at(kForce), at(0_ms)).code(), Errc::kFailedPrecondition);
  // Withdrawn before its grant: the GPU serves as before.
  ASSERT_TRUE(rank_.end_lease(0, at(0_ms), at(0_ms)).ok());
  EXPECT_TRUE(fire(0_ms).empty());
  rank_.on_candidate(0, cand(1, 1_ms, 5_ms), at(0_ms));
  auto a = fire(1_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kGrant);
}

// Each GPU has its own lease: one waiting for its GPU's batch holds back no
// other GPU's, and each GPU serves again from its own end_lease().
TEST_F(RankStateTest, LeasesOfDifferentGpusAreGrantedAndEndedIndependently) {
  const TimePoint never = TimePoint::infinite();
  rank_.on_candidate(0, cand(1, 0_ms, 5_ms), at(0_ms));
  auto a = fire(0_ms);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(a[0].gpu, 0u);
  rank_.on_grant_result(0, 0, dispatched(1, 30_ms, 30_ms), at(0_ms));
  ASSERT_TRUE(rank_.request_lease(0, 10_ms, never, at(1_ms)).ok());
  ASSERT_TRUE(rank_.request_lease(1, 10_ms, never, at(1_ms)).ok());
  ASSERT_TRUE(rank_.request_lease(2, 10_ms, never, at(1_ms)).ok());
  EXPECT_EQ(rank_.request_lease(1, 10_ms, never, at(1_ms)).code(), Errc::kFailedPrecondition);
  a = fire(1_ms);  // GPUs 1 and 2 are idle: both at once; GPU 0 runs a batch
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kLease);
  EXPECT_EQ(a[1].kind, RankAction::Kind::kLease);
  EXPECT_EQ(a[0].gpu + a[1].gpu, 3u);
  EXPECT_TRUE(rank_.lease_held(1) && rank_.lease_held(2));
  EXPECT_FALSE(rank_.lease_held(0));
  rank_.on_batch_finished(0, 1, at(29_ms), at(29_ms));
  a = fire(29_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kLease);
  EXPECT_EQ(a[0].gpu, 0u);
  // Every GPU leased: a candidate waits, then gets the GPU whose lease ends.
  rank_.on_candidate(1, cand(1, 31_ms, 60_ms), at(30_ms));
  EXPECT_TRUE(fire(31_ms).empty());
  EXPECT_EQ(rank_.model_state(1), RankModelState::kWaiting);
  ASSERT_TRUE(rank_.end_lease(1, at(35_ms), at(35_ms)).ok());
  a = fire(35_ms);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RankAction::Kind::kGrant);
  EXPECT_EQ(a[0].gpu, 1u);
  EXPECT_EQ(rank_.gpu_state(0), RankGpuState::kLeased);
  EXPECT_EQ(rank_.gpu_state(2), RankGpuState::kLeased);
  EXPECT_TRUE(rank_.lease_held(0) && rank_.lease_held(2));
  ASSERT_TRUE(rank_.end_lease(0, at(40_ms), at(40_ms)).ok());
  ASSERT_TRUE(rank_.end_lease(2, at(40_ms), at(40_ms)).ok());
  EXPECT_EQ(rank_.gpu_state(0), RankGpuState::kIdle);
  EXPECT_EQ(rank_.gpu_state(2), RankGpuState::kIdle);
  check(40_ms);
}

}  // namespace
}  // namespace symphony
