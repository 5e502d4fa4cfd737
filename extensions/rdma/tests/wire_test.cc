// The wire protocol: every message round-trips and keeps its layout byte for
// byte; every malformed message is refused with a reason (truncated,
// oversized, wrong magic/version/kind, counts that overflow the length,
// trailing bytes, strings over their limit).
#include "symphony/cluster/wire.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <utility>

#include "symphony/types.hpp"

namespace symphony::cluster::wire {
namespace {

using Bytes = std::vector<std::uint8_t>;

void put_u32(Bytes& b, std::size_t off, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (8 * i));
}

// Asserts that `b` is refused and the reason mentions `needle`.
void expect_refused(const Bytes& b, const std::string& needle) {
  const Status s = validate(b);
  ASSERT_FALSE(s.ok()) << "accepted a bad message (expected: " << needle << ")";
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

TEST(WireTest, HeaderIsLittleEndianWithMagicVersionKindLength) {
  const Bytes m = encode(Ping{0x0102030405060708ull, -5});
  ASSERT_EQ(m.size(), kHeaderBytes + 16);
  EXPECT_EQ(m[0], 'S');
  EXPECT_EQ(m[1], 'Y');
  EXPECT_EQ(m[2], 'M');
  EXPECT_EQ(m[3], 'C');
  EXPECT_EQ(m[4], kVersion);
  EXPECT_EQ(m[5], 0);
  EXPECT_EQ(m[6], static_cast<std::uint8_t>(Kind::kPing));
  EXPECT_EQ(m[8], m.size());
  EXPECT_EQ(m[16], 0x08);  // seq, least significant byte first
  EXPECT_EQ(m[23], 0x01);
  Result<Ping> p = decode_ping(m);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->seq, 0x0102030405060708ull);
  EXPECT_EQ(p->origin_ns, -5);
}

TEST(WireTest, ControlMessagesRoundTrip) {
  Hello h{Role::kBackend, 4242, 0xdeadbeefcafeull, 7, "secret-token", "backend-1", "10.0.0.2:5000"};
  Result<Hello> h2 = decode_hello(encode(h));
  ASSERT_TRUE(h2.ok()) << h2.status().message();
  EXPECT_EQ(h2->role, Role::kBackend);
  EXPECT_EQ(h2->pid, 4242u);
  EXPECT_EQ(h2->incarnation, 0xdeadbeefcafeull);
  EXPECT_EQ(h2->term, 7u);
  EXPECT_EQ(h2->token, "secret-token");
  EXPECT_EQ(h2->name, "backend-1");
  EXPECT_EQ(h2->address, "10.0.0.2:5000");

  Welcome w{3,         99,         7,
            100000000, 1000000000, {{0, 64, 25000000, "ResNet50"}, {1, 8, 5000000, "tiny", 3, 2, 1500000}}};
  Result<Welcome> w2 = decode_welcome(encode(w));
  ASSERT_TRUE(w2.ok()) << w2.status().message();
  EXPECT_EQ(w2->peer_id, 3u);
  EXPECT_EQ(w2->term, 7u);
  ASSERT_EQ(w2->models.size(), 2u);
  EXPECT_EQ(w2->models[1].name, "tiny");
  EXPECT_EQ(w2->models[1].slo_ns, 5000000);
  EXPECT_EQ(w2->models[1].priority_levels, 3u);
  EXPECT_EQ(w2->models[1].default_priority_level, 2u);
  EXPECT_EQ(w2->models[0].priority_levels, 0u);
  EXPECT_EQ(w2->models[1].least_ns, 1500000);
  EXPECT_EQ(w2->models[0].least_ns, 0);
  EXPECT_EQ(w2->heartbeat_timeout_ns, 1000000000);

  Result<Register> r = decode_register(encode(Register{{"emulated:0", "emulated:1"}, {"ResNet50"}, {}, {}}));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->devices.size(), 2u);
  EXPECT_EQ(r->models[0], "ResNet50");

  Result<Registered> rg = decode_registered(encode(Registered{{4, 5, 6}}));
  ASSERT_TRUE(rg.ok());
  EXPECT_EQ(rg->gpus, (std::vector<std::uint32_t>{4, 5, 6}));

  Result<FrontendJoined> fj = decode_frontend_joined(encode(FrontendJoined{7, 2, 11, "127.0.0.1:4000"}));
  ASSERT_TRUE(fj.ok());
  EXPECT_EQ(fj->address, "127.0.0.1:4000");
  EXPECT_EQ(fj->generation, 2u);

  Result<PoolInfo> pi = decode_pool_info(encode(PoolInfo{0x7f0000001000ull, 1 << 20, {1, 2, 3, 4}, 2, 3}));
  ASSERT_TRUE(pi.ok());
  EXPECT_EQ(pi->rkey.size(), 4u);
  EXPECT_EQ(pi->index, 2u);
  EXPECT_EQ(pi->regions, 3u);
  EXPECT_EQ(decode_pool_ack(encode(PoolAck{5}))->index, 5u);
  EXPECT_EQ(decode_pool_drop(encode(PoolDrop{6}))->index, 6u);

  BatchDone bd;
  bd.batch = 77;
  bd.status = BatchStatus::kError;
  bd.executed = 5;
  bd.fetch_ns = 1234;
  bd.error = "model raised";
  Result<BatchDone> bd2 = decode_batch_done(encode(bd));
  ASSERT_TRUE(bd2.ok()) << bd2.status().message();
  EXPECT_EQ(bd2->status, BatchStatus::kError);
  EXPECT_EQ(bd2->error, "model raised");
  EXPECT_EQ(bd2->fetch_ns, 1234);

  EXPECT_EQ(decode_refuse(encode(Refuse{"wrong token"}))->reason, "wrong token");
  EXPECT_EQ(decode_goodbye(encode(Goodbye{"stopping"}))->reason, "stopping");
  EXPECT_EQ(decode_frontend_left(encode(FrontendLeft{1, 9}))->generation, 9u);
  EXPECT_EQ(decode_pong(encode(Pong{5, 6}))->origin_ns, 6);
  EXPECT_EQ(decode_pong(encode(Pong{5, 6, 7000}))->reply_path_ns, 7000);

  Result<Placement> pl = decode_placement(encode(Placement{12, 3, {0, 2}, {1}}));
  ASSERT_TRUE(pl.ok()) << pl.status().message();
  EXPECT_EQ(pl->seq, 12u);
  EXPECT_EQ(pl->device, 3u);
  EXPECT_EQ(pl->load, (std::vector<std::uint32_t>{0, 2}));
  EXPECT_EQ(pl->unload, (std::vector<std::uint32_t>{1}));
  Result<PlacementDone> pd =
      decode_placement_done(encode(PlacementDone{12, 3, BatchStatus::kError, "no such model"}));
  ASSERT_TRUE(pd.ok()) << pd.status().message();
  EXPECT_EQ(pd->status, BatchStatus::kError);
  EXPECT_EQ(pd->error, "no such model");

  Result<Cancel> c = decode_cancel(encode(Cancel{{(7ull << 32) | 3, 1, ~0ull}}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->requests, (std::vector<std::uint64_t>{(7ull << 32) | 3, 1, ~0ull}));
  EXPECT_EQ(to_string(Kind::kCancel), "Cancel");
}

TEST(WireTest, StatsRequestAndStatsRoundTrip) {
  Result<StatsRequest> q = decode_stats_request(encode(StatsRequest{42}));
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->seq, 42u);
  Stats in;
  in.seq = 42;
  in.models.push_back(
      {0, 7, 1, 2, 3, 800, 90, 300, 400, 1700000000000, {{1, 4, 100}, {8, 2, 900}}, "linear", 2});
  in.models.push_back({1, 0, 0, 0, 0, 0, 0, 0, 0, 0, {}, "x", -1});
  Result<Stats> out = decode_stats(encode(in));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->seq, 42u);
  ASSERT_EQ(out->models.size(), 2u);
  const ModelStats& m = out->models[0];
  EXPECT_EQ(m.model, 0u);
  EXPECT_EQ(m.ok, 7u);
  EXPECT_EQ(m.late, 1u);
  EXPECT_EQ(m.dropped, 2u);
  EXPECT_EQ(m.errors, 3u);
  EXPECT_EQ(m.success_ns, 800);
  EXPECT_EQ(m.fail_ns, 90);
  EXPECT_EQ(m.queue_ns, 300);
  EXPECT_EQ(m.compute_ns, 400);
  EXPECT_EQ(m.last_end_ms, 1700000000000);
  ASSERT_EQ(m.batches.size(), 2u);
  EXPECT_EQ(m.batches[1].size, 8u);
  EXPECT_EQ(m.batches[1].count, 2u);
  EXPECT_EQ(m.batches[1].exec_ns, 900);
  EXPECT_EQ(m.name, "linear");
  EXPECT_EQ(m.version, 2);
  EXPECT_TRUE(out->models[1].batches.empty());
  EXPECT_EQ(out->models[1].version, -1);
  EXPECT_EQ(to_string(Kind::kStatsRequest), "StatsRequest");
  EXPECT_EQ(to_string(Kind::kStats), "Stats");
}

TEST(WireTest, ModelControlAndModelTableRoundTrip) {
  Result<ModelControl> c = decode_model_control(encode(ModelControl{9, ModelOp::kUnload, "linear"}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->seq, 9u);
  EXPECT_EQ(c->op, ModelOp::kUnload);
  EXPECT_EQ(c->model, "linear");
  Result<ModelControlDone> d = decode_model_control_done(encode(ModelControlDone{9, 5, "no model 'x'"}));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->seq, 9u);
  EXPECT_EQ(d->code, 5u);
  EXPECT_EQ(d->message, "no model 'x'");
  Result<ModelTable> t =
      decode_model_table(encode(ModelTable{{{0, 8, 100, "a", 0, 0}},
                                           {{"linear/1", "unloaded"}},
                                           {{"linear", 3, "the reload failed: not a TorchScript file"}}}));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->models.size(), 1u);
  EXPECT_EQ(t->models[0].name, "a");
  ASSERT_EQ(t->unserved.size(), 1u);
  EXPECT_EQ(t->unserved[0].name, "linear/1");
  EXPECT_EQ(t->unserved[0].reason, "unloaded");
  ASSERT_EQ(t->notes.size(), 1u);
  EXPECT_EQ(t->notes[0].model, "linear");
  EXPECT_EQ(t->notes[0].version, 3);
  EXPECT_EQ(t->notes[0].reason, "the reload failed: not a TorchScript file");
  expect_refused(encode(ModelControl{1, static_cast<ModelOp>(3), "m"}),
                 "model control op 3 (1 load, 2 unload)");
  expect_refused(encode(ModelControl{1, ModelOp::kLoad, ""}), "model control names no model");
  expect_refused(encode(ModelTable{{}, {{"", "why"}}, {}}), "an unserved model without a name");
  expect_refused(encode(ModelTable{{}, {}, {{"m", -1, "why"}}}),
                 "a version note without a model or a version");
  EXPECT_EQ(to_string(Kind::kModelControl), "ModelControl");
  EXPECT_EQ(to_string(Kind::kModelControlDone), "ModelControlDone");
  EXPECT_EQ(to_string(Kind::kModelTable), "ModelTable");
}

TEST(WireTest, ModelLoadAndItsAnswerRoundTrip) {
  Result<ModelLoad> l =
      decode_model_load(encode(ModelLoad{4, 7, 16, 2, "linear", "linear", 4500000, "served/1"}));
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->seq, 4u);
  EXPECT_EQ(l->model, 7u);
  EXPECT_EQ(l->max_batch, 16u);
  EXPECT_EQ(l->version, 2);
  EXPECT_EQ(l->name, "linear");
  EXPECT_EQ(l->repository_model, "linear");
  EXPECT_EQ(l->run_limit_ns, 4500000);
  EXPECT_EQ(l->tightest, "served/1");
  Result<ModelLoad> alone = decode_model_load(encode(ModelLoad{4, 7, 16, 2, "linear", "linear", -1, {}}));
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_EQ(alone->run_limit_ns, -1) << "nothing served beside it: no limit";
  Result<ModelLoadDone> d =
      decode_model_load_done(encode(ModelLoadDone{4, 7, BatchStatus::kError, "no such file"}));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->model, 7u);
  EXPECT_EQ(d->status, BatchStatus::kError);
  EXPECT_EQ(d->error, "no such file");
  expect_refused(encode(ModelLoad{1, 0, 1, 1, "", "m", -1, {}}), "a model load names no model");
  expect_refused(encode(ModelLoad{1, 0, 1, -1, "m", "m", -1, {}}), "a model load of version -1");
  expect_refused(encode(ModelLoad{1, 0, 1, 1, "m", "m", -2, "s"}), "a model load's run limit of -2 ns");
  expect_refused(encode(ModelLoad{1, 0, 1, 1, "m", "m", kMaxDurationNs + 1, "s"}),
                 "a model load's run limit of " + std::to_string(kMaxDurationNs + 1) + " ns");
  expect_refused(encode(ModelLoad{1, 0, 1, 1, "m", "m", 0, ""}),
                 "a model load's run limit names no served model");
  EXPECT_EQ(to_string(Kind::kModelLoad), "ModelLoad");
  EXPECT_EQ(to_string(Kind::kModelLoadDone), "ModelLoadDone");
  Result<ModelUnload> u = decode_model_unload(encode(ModelUnload{4, 7, "linear#reload2/3"}));
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->seq, 4u);
  EXPECT_EQ(u->model, 7u);
  EXPECT_EQ(u->name, "linear#reload2/3");
  expect_refused(encode(ModelUnload{4, 7, ""}), "a model unload names no model");
  EXPECT_EQ(to_string(Kind::kModelUnload), "ModelUnload");
}

TEST(WireTest, LeasesRoundTrip) {
  Result<LeaseRequest> q = decode_lease_request(encode(LeaseRequest{5, 2, 3000000, 5000000000}));
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->seq, 5u);
  EXPECT_EQ(q->device, 2u);
  EXPECT_EQ(q->length_ns, 3000000);
  EXPECT_EQ(q->max_wait_ns, 5000000000);
  Result<LeaseGrant> g = decode_lease_grant(encode(LeaseGrant{5, BatchStatus::kError, "found no gap"}));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->status, BatchStatus::kError);
  EXPECT_EQ(g->error, "found no gap");
  Result<LeaseEnd> e = decode_lease_end(encode(LeaseEnd{5, 2500000}));
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->ran_ns, 2500000);
  expect_refused(encode(LeaseRequest{5, 2, -2, 0}), "a lease of length -2");
  expect_refused(encode(LeaseRequest{5, 2, -1, -1}), "a lease that waits -1");
  expect_refused(encode(LeaseEnd{5, -1}), "a leased run of -1 ns");
  EXPECT_EQ(to_string(Kind::kLeaseRequest), "LeaseRequest");
  EXPECT_EQ(to_string(Kind::kLeaseGrant), "LeaseGrant");
  EXPECT_EQ(to_string(Kind::kLeaseEnd), "LeaseEnd");
}

TEST(WireTest, AdmissionRoundTrips) {
  Result<Admission> a = decode_admission(
      encode(Admission{{{3, 2, 30000000, 250000, 1500000, -2000000, 300000}, {4, 1, 0, 0, 0, 0}}}));
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->models.size(), 2u);
  EXPECT_EQ(a->models[0].model, 3u);
  EXPECT_EQ(a->models[0].levels, 2u);
  EXPECT_EQ(a->models[0].work_ns, 30000000);
  EXPECT_EQ(a->models[0].per_request_ns, 250000);
  EXPECT_EQ(a->models[0].resp_ns, 1500000);
  EXPECT_EQ(a->models[0].last_left_ns, -2000000);
  EXPECT_EQ(a->models[0].share_ppm, 300000u);
  EXPECT_EQ(a->models[1].work_ns, 0);
  EXPECT_EQ(a->models[1].share_ppm, 1000000u);
  expect_refused(encode(Admission{{{3, 0, 1, 0, 0, 0}}}), "with no level");
  expect_refused(encode(Admission{{{3, 1, -1, 0, 0, 0}}}), "an admission duration is negative");
  expect_refused(encode(Admission{{{3, 1, 1, -1, 0, 0}}}), "an admission duration is negative");
  expect_refused(encode(Admission{{{3, 1, 1, 0, 0, std::int64_t{4000} * 1000000000}}}),
                 "more than an hour away");
  expect_refused(encode(Admission{{{3, 1, 1, 0, 0, 0, 0}}}), "backlog share is 0 millionths");
  expect_refused(encode(Admission{{{3, 1, 1, 0, 0, 0, 1000001}}}), "backlog share is 1000001 millionths");
  EXPECT_EQ(to_string(Kind::kAdmission), "Admission");
}

TEST(WireTest, StandingRoundTripsWithTheCalibrationsAndTheRepository) {
  const Standing in{7,
                    true,
                    1,
                    100,
                    2,
                    50,
                    9,
                    {0xabc, 0xdef},
                    {0, 1, 0},
                    {{0, {1000000}}, {2, {800000, 1500000, 4000000}}},
                    {{"linear", true, 0x1234567890abcdefULL}, {"gone", false, 0}, {"fresh", false, 0, true}}};
  Result<Standing> out = decode_standing(encode(in));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->term, 7u);
  EXPECT_TRUE(out->primary);
  EXPECT_EQ(out->index, 1u);
  EXPECT_EQ(out->d_ctrl_ns, 100);
  EXPECT_EQ(out->d_data_ns, 2);
  EXPECT_EQ(out->d_resp_ns, 50);
  EXPECT_EQ(out->epoch, 9u);
  EXPECT_EQ(out->backends, in.backends);
  EXPECT_EQ(out->subclusters, in.subclusters);
  ASSERT_EQ(out->calibrations.size(), 2u);
  EXPECT_EQ(out->calibrations[1].model, 2u);
  EXPECT_EQ(out->calibrations[1].scales_e6, in.calibrations[1].scales_e6);
  ASSERT_EQ(out->repository.size(), 3u);
  EXPECT_EQ(out->repository[0].model, "linear");
  EXPECT_TRUE(out->repository[0].served);
  EXPECT_FALSE(out->repository[0].loading);
  EXPECT_EQ(out->repository[0].files, 0x1234567890abcdefULL);
  EXPECT_EQ(out->repository[1].model, "gone");
  EXPECT_FALSE(out->repository[1].served);
  EXPECT_EQ(out->repository[2].model, "fresh");
  EXPECT_TRUE(out->repository[2].loading);
}

TEST(WireTest, HotMessagesRoundTripThroughViews) {
  SubmitBuilder sb;
  for (std::uint32_t i = 0; i < 100; ++i)
    sb.add({i, 0x1000 + i * 64, 64, i % 3, 25000000 - i, i % 4, 1000 * i});
  Bytes sm = std::move(sb).finish();
  Result<SubmitView> sv = decode_submit(sm);
  ASSERT_TRUE(sv.ok()) << sv.status().message();
  ASSERT_EQ(sv->entries.size(), 100u);
  EXPECT_EQ(sv->entries[42].request, 42u);
  EXPECT_EQ(sv->entries[42].addr, 0x1000u + 42 * 64);
  EXPECT_EQ(sv->entries[42].model, 0u);
  EXPECT_EQ(sv->entries[42].budget_ns, 25000000 - 42);
  EXPECT_EQ(sv->entries[42].level, 2u);
  EXPECT_EQ(sv->entries[43].level, 3u);
  EXPECT_EQ(sv->entries[42].waited_us, 42000u);
  EXPECT_EQ(sv->entries[0].waited_us, 0u);

  BatchBuilder bb(0xabcdef, 3, 1, 7000000, 20000000, 16);
  for (std::uint32_t i = 0; i < 16; ++i) bb.add({i * 10, 0x2000 + i, 150000, i % 2, 1});
  Bytes bm = std::move(bb).finish();
  Result<BatchView> bv = decode_batch(bm);
  ASSERT_TRUE(bv.ok()) << bv.status().message();
  EXPECT_EQ(bv->batch, 0xabcdefu);
  EXPECT_EQ(bv->device, 3u);
  EXPECT_EQ(bv->planned_size, 16u);
  ASSERT_EQ(bv->entries.size(), 16u);
  EXPECT_EQ(bv->entries[15].request, 150u);
  EXPECT_EQ(bv->entries[15].len, 150000u);
  EXPECT_EQ(bv->entries[15].frontend_id, 1u);

  OutputsBuilder ob(5, 16, BatchStatus::kOk, "");
  const std::uint8_t a[3] = {1, 2, 3}, b[1] = {9};
  ob.add(10, a);
  ob.add(11, b);
  const Bytes om = std::move(ob).finish();  // views point into the bytes: keep them
  Result<OutputsView> ov = decode_outputs(om);
  ASSERT_TRUE(ov.ok()) << ov.status().message();
  ASSERT_EQ(ov->entries.size(), 2u);
  EXPECT_EQ(ov->entries[1].request, 11u);
  ASSERT_EQ(ov->payload.size(), 4u);
  EXPECT_EQ(ov->payload[3], 9);

  OutcomesBuilder cb("backend 'b1' lost");
  cb.add({5, static_cast<std::uint8_t>(Outcome::kError), 0});
  cb.add({6, static_cast<std::uint8_t>(Outcome::kDropped), static_cast<std::uint8_t>(DropReason::kExpired)});
  // The last drop reason (the decoder checks reasons against kNumDropReasons).
  cb.add(
      {7, static_cast<std::uint8_t>(Outcome::kDropped), static_cast<std::uint8_t>(DropReason::kPushedOut)});
  const Bytes cm = std::move(cb).finish();
  Result<OutcomesView> cv = decode_outcomes(cm);
  ASSERT_TRUE(cv.ok()) << cv.status().message();
  EXPECT_EQ(cv->text, "backend 'b1' lost");
  EXPECT_EQ(cv->entries[1].reason, static_cast<std::uint8_t>(DropReason::kExpired));
  EXPECT_EQ(cv->entries[2].reason, static_cast<std::uint8_t>(DropReason::kPushedOut));
}

// The bytes of one message of every kind, written out: encoders and decoders
// share one description per message, so a round trip cannot notice a change
// to it; this does.
TEST(WireTest, EveryKindKeepsItsLayout) {
  std::vector<std::pair<std::string, Bytes>> msgs;
  msgs.emplace_back("Hello",
                    encode(Hello{Role::kBackend, 0x01020304, 0x1112131415161718ull, 0x19, "tk", "n", "a:1"}));
  msgs.emplace_back("Welcome", encode(Welcome{7, 0x21, 0x22, 0x31, 0x41, {{5, 8, 0x51, "m", 3, 2, 0x61}}}));
  Refuse refuse{"no"};
  refuse.term = 0x23;
  refuse.spare = true;
  refuse.primary = "p:2";
  msgs.emplace_back("Refuse", encode(refuse));
  msgs.emplace_back("Register", encode(Register{{"d0", "d1"}, {"m"}, {{0x24, 0x25}}, {0x26, 0x27}}));
  msgs.emplace_back("Registered", encode(Registered{{4, 5}}));
  msgs.emplace_back("FrontendJoined", encode(FrontendJoined{1, 2, 3, "h:9"}));
  msgs.emplace_back("FrontendLeft", encode(FrontendLeft{1, 2}));
  msgs.emplace_back("PoolInfo", encode(PoolInfo{0x1000, 0x20, {0xaa, 0xbb}, 1, 2}));
  msgs.emplace_back("PoolAck", encode(PoolAck{0x0102}));
  msgs.emplace_back("PoolDrop", encode(PoolDrop{0x0304}));
  msgs.emplace_back("Ping", encode(Ping{1, -2}));
  msgs.emplace_back("Pong", encode(Pong{3, 4, 5}));
  msgs.emplace_back("Goodbye", encode(Goodbye{"bye"}));
  msgs.emplace_back("BatchDone",
                    encode(BatchDone{9, BatchStatus::kError, 3, 0x11, 0x12, 0x13, 0x14, 0x15, "e"}));
  msgs.emplace_back("Placement", encode(Placement{6, 1, {2, 3}, {4}}));
  msgs.emplace_back("PlacementDone", encode(PlacementDone{6, 1, BatchStatus::kError, "x"}));
  msgs.emplace_back("Cancel", encode(Cancel{{0x0102, 0x0304}}));
  msgs.emplace_back("StatsRequest", encode(StatsRequest{0x0102}));
  msgs.emplace_back("Stats",
                    encode(Stats{0x31, {{2, 3, 4, 5, 6, 7, 8, 9, 0xa, 0xb, {{1, 0xc, 0xd}}, "m", 0xe}}}));
  msgs.emplace_back("ModelControl", encode(ModelControl{0x0102, ModelOp::kUnload, "m"}));
  msgs.emplace_back("ModelControlDone", encode(ModelControlDone{0x0102, 5, "no"}));
  msgs.emplace_back("ModelTable",
                    encode(ModelTable{{{5, 8, 0x51, "m", 3, 2, 0x61}}, {{"u", "r"}}, {{"m", 2, "x"}}}));
  msgs.emplace_back("ModelLoad", encode(ModelLoad{0x0102, 3, 8, 2, "m", "r", 0x40, "t"}));
  msgs.emplace_back("ModelLoadDone", encode(ModelLoadDone{0x0102, 3, BatchStatus::kError, "x"}));
  msgs.emplace_back("ModelUnload", encode(ModelUnload{0x0102, 3, "m"}));
  msgs.emplace_back("LeaseRequest", encode(LeaseRequest{0x0102, 3, 0x10, 0x20}));
  msgs.emplace_back("LeaseGrant", encode(LeaseGrant{0x0102, BatchStatus::kError, "x"}));
  msgs.emplace_back("LeaseEnd", encode(LeaseEnd{0x0102, 0x30}));
  msgs.emplace_back("Admission", encode(Admission{{{3, 2, 0x10, 0x18, 0x20, -1}}}));
  msgs.emplace_back("Standing", encode(Standing{0x26,
                                                true,
                                                2,
                                                0x27,
                                                0x28,
                                                0x29,
                                                0x2a,
                                                {0x2b},
                                                {0, 1},
                                                {{3, {1000000, 1250000}}},
                                                {{"m", true, 0x2c}}}));
  SubmitBuilder sb(64, kSubmitResubmitted);
  sb.add({1, 0x1000, 64, 2, 0x33, 1, 0x34});
  msgs.emplace_back("Submit", std::move(sb).finish());
  BatchBuilder bb(9, 1, 2, 0x70, 0x80, 3);
  bb.add({1, 0x1000, 64, 5, 6});
  msgs.emplace_back("Batch", std::move(bb).finish());
  OutputsBuilder ob(9, 3, BatchStatus::kOk, "w");
  const std::uint8_t out[2] = {0xee, 0xff};
  ob.add(1, out);
  msgs.emplace_back("Outputs", std::move(ob).finish());
  OutcomesBuilder cb("t");
  cb.add({1, static_cast<std::uint8_t>(Outcome::kDropped), 2});
  msgs.emplace_back("Outcomes", std::move(cb).finish());

  const std::map<std::string, std::string> want = {
      {"Hello", "02000000040302011817161514131211190000000000000002000000746b010000006e03000000613a31"},
      {"Welcome",
       "0700000001000000210000000000000022000000000000003100000000000000410000000000000005000000080000005100"
       "000000000000010000006d03000000020000006100000000000000"},
      {"Refuse", "020000006e6f23000000000000000100000003000000703a32"},
      {"Register",
       "02000000010000000100000002000000020000006430020000006431010000006d2400000000000000250000000000000026"
       "000000000000002700000000000000"},
      {"Registered", "020000000400000005000000"},
      {"FrontendJoined", "0100000002000000030000000000000003000000683a39"},
      {"FrontendLeft", "0100000002000000"},
      {"PoolInfo", "0010000000000000200000000000000002000000aabb0100000002000000"},
      {"PoolAck", "02010000"},
      {"PoolDrop", "04030000"},
      {"Ping", "0100000000000000feffffffffffffff"},
      {"Pong", "030000000000000004000000000000000500000000000000"},
      {"Goodbye", "03000000627965"},
      {"BatchDone",
       "09000000000000000100000003000000110000000000000012000000000000001300000000000000140000000000000015000"
       "000000000000100000065"},
      {"Placement", "0600000000000000010000000200000001000000020000000300000004000000"},
      {"PlacementDone", "060000000000000001000000010100000078"},
      {"Cancel", "0200000002010000000000000403000000000000"},
      {"StatsRequest", "0201000000000000"},
      {"ModelControl", "020100000000000002000000010000006d"},
      {"ModelControlDone", "020100000000000005000000020000006e6f"},
      {"ModelTable",
       "010000000100000001000000050000000800000051000000000000000100"
       "00006d03000000020000006100000000000000010000007501000000720200000000000000010000006d0100000078"},
      {"ModelLoad",
       "020100000000000003000000080000000200000000000000010000006d01000000"
       "7240000000000000000100000074"},
      {"ModelLoadDone",
       "02010000000000000300000001000000010000"
       "0078"},
      {"ModelUnload", "020100000000000003000000010000006d"},
      {"LeaseRequest",
       "020100000000000003000000000000001000000000000000"
       "2000000000000000"},
      {"LeaseGrant", "0201000000000000010000000100000078"},
      {"LeaseEnd", "02010000000000003000000000000000"},
      {"Admission",
       "0100000003000000020000001000000000000000"
       "18000000000000002000000000000000ffffffffffffffff"
       "40420f00"},
      {"Stats",
       "31000000000000000100000002000000010000000300000000000000040000000000000005000000000000000600000000000"
       "0"
       "000700000000000000080000000000000009000000000000000a000000000000000b000000000000000100000000000000"
       "0c000000000000000d00000000000000"
       "0e00000000000000010000006d"},
      {"Standing",
       "260000000000000001000000020000002700000000000000280000000000000029000000000000002a000000000000000100"
       "000002000000010000002b0000000000000000000000010000000300000002000000"
       "40420f00d0121300"
       "010000002c000000000000000100000001000000"
       "6d"},
      {"Submit",
       "010000000100000001000000000000000010000000000000400000000200000033000000000000000100000034000000"},
      {"Batch",
       "09000000000000000100000002000000700000000000000080000000000000000300000001000000010000000000000000100"
       "0000000000040000000050000000600000000000000"},
      {"Outputs", "0900000000000000030000000100000000000000010000007701000000000000000200000000000000eeff"},
      {"Outcomes", "01000000010000007401000000000000000202000000000000"},
  };
  ASSERT_EQ(msgs.size(), std::size_t{kMaxKind});  // every kind
  for (const auto& [kind, m] : msgs) {
    SCOPED_TRACE(kind);
    Result<Header> h = decode_header(m);
    ASSERT_TRUE(h.ok()) << h.status().message();
    EXPECT_EQ(to_string(h->kind), kind);
    EXPECT_EQ(h->version, kVersion);
    EXPECT_EQ(h->length, m.size());
    std::string body;
    for (std::size_t i = kHeaderBytes; i < m.size(); ++i) {
      char hex[3];
      std::snprintf(hex, sizeof hex, "%02x", m[i]);
      body += hex;
    }
    EXPECT_EQ(body, want.at(kind));
    EXPECT_TRUE(validate(m).ok()) << validate(m).message();
  }
}

// A peer of the previous version is refused at its Hello, naming both
// versions (the scheduler and the frontends send that text back in a Refuse).
TEST(WireTest, HelloOfTheOlderVersionIsRefused) {
  Bytes m = encode(Hello{Role::kFrontend, 1, 2, 0, "tok", "fe", "127.0.0.1:1"});
  ASSERT_TRUE(decode_hello(m).ok());
  m[4] = static_cast<std::uint8_t>(kVersion - 1);
  Result<Hello> h = decode_hello(m);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().message(), "unsupported protocol version 23 (this build speaks version 24)");
}

TEST(WireTest, RefusesBadHeaders) {
  const Bytes good = encode(Ping{1, 2});
  expect_refused(Bytes(good.begin(), good.begin() + 10), "truncated message");
  Bytes m = good;
  m[0] = 'X';
  expect_refused(m, "wrong magic");
  m = good;
  m[4] = 1;  // version 1 had no Cancel: a peer speaking it is refused, naming both versions
  expect_refused(m, "unsupported protocol version 1 (this build speaks version 24)");
  m = good;
  m[4] = 3;  // version 3 had no terms
  expect_refused(m, "unsupported protocol version 3 (this build speaks version 24)");
  m = good;
  m[4] = 4;  // version 4's Standing had no calibrations
  expect_refused(m, "unsupported protocol version 4 (this build speaks version 24)");
  m = good;
  m[4] = 5;  // version 5 had no StatsRequest and Stats
  expect_refused(m, "unsupported protocol version 5 (this build speaks version 24)");
  m = good;
  m[4] = 6;  // version 6 carried no priorities (32-byte SubmitEntry, no levels in Welcome)
  expect_refused(m, "unsupported protocol version 6 (this build speaks version 24)");
  m = good;
  m[4] = 7;  // version 7 had no model control (ModelControl, ModelControlDone, ModelTable)
  expect_refused(m, "unsupported protocol version 7 (this build speaks version 24)");
  m = good;
  m[4] = 8;  // version 8 had no model loads on backends (ModelLoad, ModelLoadDone)
  expect_refused(m, "unsupported protocol version 8 (this build speaks version 24)");
  m = good;
  m[4] = 9;  // version 9's ModelTable had no notes
  expect_refused(m, "unsupported protocol version 9 (this build speaks version 24)");
  m = good;
  m[4] = 10;  // version 10 had no ModelUnload
  expect_refused(m, "unsupported protocol version 10 (this build speaks version 24)");
  m = good;
  m[4] = 11;  // version 11's Stats counted by model id, not by account
  expect_refused(m, "unsupported protocol version 11 (this build speaks version 24)");
  m = good;
  m[4] = 12;  // version 12 had no leases
  expect_refused(m, "unsupported protocol version 12 (this build speaks version 24)");
  m = good;
  m[4] = 13;  // version 13 had no Admission
  expect_refused(m, "unsupported protocol version 13 (this build speaks version 24)");
  m = good;
  m[4] = 14;  // version 14's ModelLoad had no run limit
  expect_refused(m, "unsupported protocol version 14 (this build speaks version 24)");
  m = good;
  m[4] = 15;  // version 15's Outcomes had no pushed_out
  expect_refused(m, "unsupported protocol version 15 (this build speaks version 24)");
  m = good;
  m[4] = 16;  // version 16's Standing had no repository models
  expect_refused(m, "unsupported protocol version 16 (this build speaks version 24)");
  m = good;
  m[4] = 17;  // version 17's Standing did not mark loads under way
  expect_refused(m, "unsupported protocol version 17 (this build speaks version 24)");
  m = good;
  m[4] = 18;  // version 18's pool was one region
  expect_refused(m, "unsupported protocol version 18 (this build speaks version 24)");
  m = good;
  m[4] = 19;  // version 19's pool never freed a region
  expect_refused(m, "unsupported protocol version 19 (this build speaks version 24)");
  m[4] = 20;  // version 20's admission tests carried no backlog share
  expect_refused(m, "unsupported protocol version 20 (this build speaks version 24)");
  m = good;
  m[4] = 21;  // version 21's model entries had no least budget
  expect_refused(m, "unsupported protocol version 21 (this build speaks version 24)");
  m = good;
  m[4] = 22;  // version 22's requests did not say how long they had waited
  expect_refused(m, "unsupported protocol version 22 (this build speaks version 24)");
  m = good;
  m[4] = 23;  // version 23's frontends did not tell their replies' way out
  expect_refused(m, "unsupported protocol version 23 (this build speaks version 24)");
  m = good;
  m[4] = 25;
  expect_refused(m, "unsupported protocol version 25");
  m = good;
  m[6] = static_cast<std::uint8_t>(kMaxKind + 1);
  expect_refused(m, "unknown message kind " + std::to_string(kMaxKind + 1));
  m = good;
  m[6] = 200;
  expect_refused(m, "unknown message kind 200");
  m = good;
  m[6] = 0;
  expect_refused(m, "unknown message kind 0");
  m = good;
  put_u32(m, 8, static_cast<std::uint32_t>(kMaxMessageBytes + 1));
  expect_refused(m, "oversized");
  m = good;
  put_u32(m, 8, static_cast<std::uint32_t>(good.size() + 8));
  expect_refused(m, "truncated Ping");
  m = good;
  m.push_back(0);  // the header still says the old length
  expect_refused(m, "overlong Ping");
  m = good;
  m[12] = 1;
  expect_refused(m, "unknown flags");
}

TEST(WireTest, RefusesBadBodies) {
  // A body one byte short, its length field fixed up: truncated at a field.
  Bytes m = encode(Ping{1, 2});
  m.pop_back();
  put_u32(m, 8, static_cast<std::uint32_t>(m.size()));
  expect_refused(m, "truncated at origin");

  // Trailing bytes after a complete body.
  m = encode(Ping{1, 2});
  m.push_back(7);
  put_u32(m, 8, static_cast<std::uint32_t>(m.size()));
  expect_refused(m, "trailing bytes");

  // A Submit whose count overflows its length (and one near 2^32).
  SubmitBuilder sb;
  sb.add({1, 2, 3, 0, 5});
  m = std::move(sb).finish();
  put_u32(m, kHeaderBytes, 2);
  expect_refused(m, "need 80 bytes, only 40 remain");
  put_u32(m, kHeaderBytes, 0xffffffffu);
  expect_refused(m, "more than the limit");
  put_u32(m, kHeaderBytes, 0);
  expect_refused(m, "no requests");

  // A Batch with more entries than planned.
  BatchBuilder bb(1, 0, 0, 100, 100, 1);
  bb.add({1, 2, 3, 0, 0});
  bb.add({2, 2, 3, 0, 0});
  expect_refused(std::move(bb).finish(), "planned for 1");

  // Outputs whose lengths overflow the payload.
  OutputsBuilder ob(5, 1, BatchStatus::kOk, "");
  const std::uint8_t a[3] = {1, 2, 3};
  ob.add(10, a);
  m = std::move(ob).finish();
  put_u32(m, m.size() - 3 - 16 + 8, 0xfffffff0u);  // the entry's len
  expect_refused(m, "output payload");

  // Outcomes with an unknown outcome or drop reason.
  OutcomesBuilder cb;
  cb.add({5, static_cast<std::uint8_t>(Outcome::kOk), 0});
  expect_refused(std::move(cb).finish(), "neither dropped nor error");
  OutcomesBuilder cb2;
  cb2.add({5, static_cast<std::uint8_t>(Outcome::kDropped), 99});
  expect_refused(std::move(cb2).finish(), "unknown drop reason 99");
  OutcomesBuilder cb3;
  cb3.add({5, static_cast<std::uint8_t>(Outcome::kDropped), static_cast<std::uint8_t>(kNumDropReasons)});
  expect_refused(std::move(cb3).finish(), "unknown drop reason " + std::to_string(kNumDropReasons));

  // Strings over their limit, and a Hello with an unknown role.
  Hello h;
  h.token = std::string(kMaxTokenBytes + 1, 'x');
  expect_refused(encode(h), "token is 257 bytes");
  h.token = "t";
  h.role = static_cast<Role>(9);
  expect_refused(encode(h), "unknown role 9");

  // A Welcome announcing more models than its bytes could hold.
  Welcome w{1, 1, 0, 1, 1, {}};
  m = encode(w);
  put_u32(m, kHeaderBytes + 4, 1000);
  expect_refused(m, "1000 models need at least 36000 bytes, only 0 remain");
  // One whose model has no SLO (a check beyond the layout).
  expect_refused(encode(Welcome{1, 1, 0, 1, 1, {{0, 8, 0, "m"}}}), "model 'm' has a non-positive SLO");
  expect_refused(encode(Welcome{1, 1, 0, 1, 1, {{0, 8, 5, "m", 2, 3}}}),
                 "model 'm' has default_priority_level 3 beyond its priority_levels 2");
  expect_refused(encode(Welcome{1, 1, 0, 1, 1, {{0, 8, 5, "m", 0, 0, -1}}}),
                 "model 'm' has a least budget negative or longer than an hour: -1 ns");
  expect_refused(encode(ModelTable{{{0, 8, 5, "m", 0, 0, kMaxDurationNs + 1}}, {}, {}}),
                 "model 'm' has a least budget negative or longer than an hour");

  // A Register with no device, and one with more devices than allowed.
  expect_refused(encode(Register{{}, {"m"}, {}, {}}), "no devices");
  expect_refused(encode(Register{{"d0", "d1"}, {"m"}, {}, {5}}), "1 busy times for 2 devices");
  expect_refused(encode(Register{{"d0"}, {"m"}, {}, {-1}}), "a busy time is negative");
  expect_refused(encode(Register{std::vector<std::string>(kMaxDevices + 1, "d"), {}, {}, {}}),
                 std::to_string(kMaxDevices + 1) + " devices, more than the limit");

  // A Standing whose calibration has a zero factor, or none, or more than a profile's size classes.
  expect_refused(encode(Standing{1, true, 0, 0, 0, 0, 0, {}, {}, {{4, {1000000, 0}}}}),
                 "model 4's calibration has a zero factor");
  expect_refused(encode(Standing{1, true, 0, 0, 0, 0, 0, {}, {}, {{4, {}}}}), "no scales");
  expect_refused(encode(Standing{1, true, 0, 0, 0, 0, 0, {}, {}, {{4, std::vector<std::uint32_t>(33, 1)}}}),
                 "33 scales, more than the limit");

  // A Stats with a negative time, and one whose batch sizes are not ascending from 1.
  expect_refused(encode(Stats{1, {{0, 1, 0, 0, 0, -5, 0, 0, 0, 0, {}, "m", 1}}}),
                 "model 0 has a negative time: -5");
  expect_refused(encode(Stats{1, {{3, 1, 0, 0, 0, 0, 0, 0, 0, 0, {{2, 1, 1}, {2, 1, 1}}, "m", 1}}}),
                 "model 3's batch sizes are not ascending from 1 (2 after 2)");
  expect_refused(encode(Stats{1, {{3, 1, 0, 0, 0, 0, 0, 0, 0, 0, {{0, 1, 1}}, "m", 1}}}), "(0 after 0)");

  // A BatchDone with a negative timing.
  BatchDone bd;
  bd.fetch_ns = -1;
  expect_refused(encode(bd), "negative");

  // A PoolInfo without rkey, and one that wraps around the address space.
  expect_refused(encode(PoolInfo{1, 2, {}}), "no rkey bytes");
  expect_refused(encode(PoolInfo{~0ull - 5, 100, {1}}), "wraps");
  expect_refused(encode(PoolInfo{1, 2, {1}, 2, 2}), "region 2 of 2");
  expect_refused(encode(PoolInfo{1, 2, {1}, 0, kMaxPoolRegions + 1}), "at most 16");

  // A Cancel with no ids, and one whose count overflows its length or the limit.
  expect_refused(encode(Cancel{}), "no request ids");
  m = encode(Cancel{{1, 2}});
  put_u32(m, kHeaderBytes, 3);
  expect_refused(m, "need 24 bytes, only 16 remain");
  put_u32(m, kHeaderBytes, kMaxEntries + 1);
  expect_refused(m, "more than the limit");

  // A Placement for a device beyond the limit, one whose unload count
  // overflows its length, and a PlacementDone with an unknown status.
  expect_refused(encode(Placement{1, kMaxDevices, {}, {}}), "device " + std::to_string(kMaxDevices));
  m = encode(Placement{1, 0, {2}, {3}});
  put_u32(m, kHeaderBytes + 16, 2);  // the unload count
  expect_refused(m, "2 models to unload need 8 bytes, only 4 remain");
  expect_refused(encode(PlacementDone{1, 0, static_cast<BatchStatus>(2), ""}), "unknown status 2");
}

TEST(WireTest, RandomCorruptionNeverCrashes) {
  // Every single-byte change and every truncation of a valid message either
  // decodes or is refused with a reason.
  std::vector<Bytes> samples;
  samples.push_back(encode(Hello{Role::kFrontend, 1, 2, 0, "tok", "fe", "127.0.0.1:1"}));
  samples.push_back(encode(Welcome{1, 2, 0, 3, 4, {{0, 8, 9, "m"}}}));
  SubmitBuilder sb;
  sb.add({1, 2, 3, 0, 5});
  samples.push_back(std::move(sb).finish());
  OutputsBuilder ob(5, 1, BatchStatus::kOk, "x");
  const std::uint8_t a[3] = {1, 2, 3};
  ob.add(10, a);
  samples.push_back(std::move(ob).finish());
  samples.push_back(encode(Cancel{{1, 2, 3}}));
  std::mt19937 rng(1);
  for (const Bytes& s : samples) {
    for (std::size_t n = 0; n < s.size(); ++n) (void)validate(std::span<const std::uint8_t>(s.data(), n));
    for (int k = 0; k < 2000; ++k) {
      Bytes m = s;
      m[rng() % m.size()] = static_cast<std::uint8_t>(rng());
      const Status st = validate(m);
      if (!st.ok()) {
        EXPECT_FALSE(st.message().empty());
      }
    }
  }
}

// The one token check that the scheduler and frontends both use.
TEST(WireTest, SameTokenComparesWholeTokens) {
  EXPECT_TRUE(same_token("secret-token", "secret-token"));
  EXPECT_TRUE(same_token("", ""));
  EXPECT_FALSE(same_token("secret-token", "secret-tokeN"));
  EXPECT_FALSE(same_token("Secret-token", "secret-token"));
  EXPECT_FALSE(same_token("secret", "secret-token"));  // a prefix is not the token
  EXPECT_FALSE(same_token("secret-token", ""));
}

}  // namespace
}  // namespace symphony::cluster::wire
