// Writes one valid message of every kind into a directory: the seed corpus of
// the wire fuzzer (cmake/RunFuzzer.cmake), so that it starts from messages
// that pass the header checks.
#include <cstdio>
#include <fstream>
#include <string>

#include "symphony/cluster/wire.hpp"
#include "symphony/types.hpp"

using namespace symphony::cluster::wire;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: wire_seeds <directory>\n");
    return 2;
  }
  std::vector<std::vector<std::uint8_t>> seeds;
  seeds.push_back(encode(Hello{Role::kFrontend, 1, 2, 3, "token", "fe", "127.0.0.1:4000"}));
  seeds.push_back(
      encode(Welcome{1, 2, 3, 100, 1000, {{0, 64, 25000000, "ResNet50"}, {1, 8, 5000000, "tiny", 3, 2}}}));
  seeds.push_back(encode(Refuse{"wrong token"}));
  seeds.push_back(encode(Register{{"emulated:0"}, {"ResNet50"}, {{7, 8}}, {1000}}));
  seeds.push_back(
      encode(Standing{5, true, 1, 10, 20, 30, 2, {9}, {0, 1}, {{1, {1000000, 1250000}}}, {{"m", true, 7}}}));
  seeds.push_back(encode(Registered{{0, 1}}));
  seeds.push_back(encode(FrontendJoined{1, 1, 3, "10.0.0.3:5000"}));
  seeds.push_back(encode(FrontendLeft{1, 1}));
  seeds.push_back(encode(PoolInfo{4096, 65536, {1, 2, 3}, 1, 2}));
  seeds.push_back(encode(PoolAck{1}));
  seeds.push_back(encode(PoolDrop{1}));
  seeds.push_back(encode(Ping{1, 2}));
  seeds.push_back(encode(Pong{1, 2, 3}));
  seeds.push_back(encode(Goodbye{"bye"}));
  seeds.push_back(encode(Placement{1, 0, {0, 2}, {1}}));
  seeds.push_back(encode(PlacementDone{1, 0, BatchStatus::kError, "no such model"}));
  seeds.push_back(encode(Cancel{{(1ull << 32) | 5, (2ull << 32) | 6}}));
  seeds.push_back(encode(StatsRequest{7}));
  seeds.push_back(encode(Stats{7,
                               {{0,
                                 10,
                                 1,
                                 2,
                                 0,
                                 5000000,
                                 20000,
                                 3000000,
                                 1500000,
                                 1700000000000,
                                 {{1, 3, 900000}, {4, 2, 1200000}},
                                 "linear",
                                 1}}}));
  seeds.push_back(encode(ModelControl{3, ModelOp::kUnload, "linear"}));
  seeds.push_back(encode(ModelControlDone{3, 0, ""}));
  seeds.push_back(encode(ModelTable{{{0, 8, 100000000, "linear", 0, 0}},
                                    {{"linear/1", "unloaded"}},
                                    {{"linear", 2, "the reload failed"}}}));
  seeds.push_back(encode(ModelLoad{3, 2, 8, 1, "linear", "linear", -1, {}}));
  seeds.push_back(encode(ModelLoad{3, 2, 8, 1, "sleepy", "sleepy", 4500000, "linear"}));
  seeds.push_back(encode(ModelLoadDone{3, 2, BatchStatus::kOk, ""}));
  seeds.push_back(encode(ModelUnload{3, 2, "linear"}));
  seeds.push_back(encode(LeaseRequest{4, 1, 2000000, 5000000000}));
  seeds.push_back(encode(LeaseGrant{4, BatchStatus::kError, "found no gap"}));
  seeds.push_back(encode(LeaseEnd{4, 1500000}));
  seeds.push_back(encode(Admission{{{0, 1, 30000000, 2250000, 1500000, 12000000}}}));
  BatchDone bd;
  bd.batch = 9;
  bd.error = "e";
  seeds.push_back(encode(bd));
  SubmitBuilder sb;
  sb.add({1, 4096, 64, 0, 1000});
  sb.add({2, 4160, 64, 0, 1000, 2});
  seeds.push_back(std::move(sb).finish());
  BatchBuilder bb(1, 0, 0, 100, 200, 2);
  bb.add({1, 4096, 64, 1, 1});
  seeds.push_back(std::move(bb).finish());
  OutputsBuilder ob(1, 1, BatchStatus::kOk, "");
  const std::uint8_t out[4] = {1, 2, 3, 4};
  ob.add(1, out);
  seeds.push_back(std::move(ob).finish());
  OutcomesBuilder cb("lost");
  cb.add({1, static_cast<std::uint8_t>(symphony::Outcome::kDropped), 2});
  seeds.push_back(std::move(cb).finish());
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream f(std::string(argv[1]) + "/seed" + std::to_string(i), std::ios::binary);
    f.write(reinterpret_cast<const char*>(seeds[i].data()), static_cast<std::streamsize>(seeds[i].size()));
    if (!f) return 1;
  }
  return 0;
}
