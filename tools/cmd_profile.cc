// `symphony profile <model.pt>`: measures a TorchScript model's latency
// profile on a device and writes the profile file `serve` reuses.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "progress.hpp"
#include "symphony/server/device.hpp"
#include "symphony/server/profiler.hpp"
#include "symphony/server/torch_model.hpp"

namespace symphony::tools {
namespace {

struct ProfileArgs {
  std::string path;
  std::string name;
  std::vector<std::string> inputs;
  std::string device = "auto";
  std::uint32_t max_batch = 64;
  int repeats = 20;
  double max_latency_ms = 2000;
  std::string out;
  int threads = 0;
  bool overlap = false;
};

int run_profile(const ProfileArgs& a) {
  using namespace symphony::server;
  auto devs = parse_devices(a.device, cuda_device_count());
  if (!devs.ok()) {
    print_error("profile", "%s\n", devs.status().message().c_str());
    return 2;
  }
  const DeviceSpec d = devs->front();
  if (!runs_model(d.kind)) {
    print_error("profile", "emulated devices have no latency to measure; give their profile in the config\n");
    return 2;
  }
  if (a.threads > 0) set_cpu_threads(a.threads);
  TorchModel::Options o;
  o.name = a.name.empty() ? model_name_from_path(a.path) : a.name;
  o.path = a.path;
  for (std::size_t i = 0; i < a.inputs.size(); ++i) {
    auto s = parse_input_spec(a.inputs[i], "input" + std::to_string(i));
    if (!s.ok()) {
      print_error("profile", "%s\n", s.status().message().c_str());
      return 2;
    }
    if (std::find(s->shape.begin(), s->shape.end(), -1) != s->shape.end()) {
      print_error("profile",
                  "--input %s: a profile is measured at fixed dims: give the size most requests have "
                  "(e.g. 128 for -1), and the same dims to serve in the model's model_warmup or "
                  "Python's profile_inputs, so that it uses this profile\n",
                  a.inputs[i].c_str());
      return 2;
    }
    o.inputs.push_back(*s);
  }
  o.devices = {torch_device(d)};
  std::fprintf(stderr, "loading %s on %s...\n", a.path.c_str(), d.to_string().c_str());
  auto m = TorchModel::load(o);
  if (!m.ok()) {
    print_error("profile", "%s\n", m.status().message().c_str());
    return 1;
  }
  ProfileOptions po;
  po.max_batch = a.max_batch;
  po.repeats = a.repeats;
  po.max_latency = Duration::from_ms(a.max_latency_ms);
  po.overlap = a.overlap;
  ProgressLine progress;
  po.progress = [&progress](std::uint32_t b, std::size_t i, std::size_t n) {
    progress.update("profiling: round " + std::to_string(i) + "/" + std::to_string(n) + " (batches 1.." +
                    std::to_string(b) + ")");
  };
  auto p = profile_model(**m, 0, po);
  progress.finish();
  if (!p.ok()) {
    print_error("profile", "%s\n", p.status().message().c_str());
    return 1;
  }
  p->device = d.to_string();
  std::printf("%s on %s: alpha %.3f ms, beta %.3f ms, max batch %u (%s)\n", p->model.c_str(),
              p->device.c_str(), p->alpha.to_ms(), p->beta.to_ms(), p->max_batch, p->stopped_because.c_str());
  std::printf("%8s %12s %12s %12s %14s\n", "batch", "median ms", "p90 ms", "p99 ms", "requests/s");
  for (const auto& pt : p->points)
    std::printf("%8u %12.3f %12.3f %12.3f %14.1f\n", pt.batch, pt.median.to_ms(), pt.p90.to_ms(),
                pt.p99.to_ms(), pt.batch / pt.median.to_seconds());
  const std::string out = a.out.empty() ? default_profile_path(a.path, d) : a.out;
  if (Status s = profile_io::write_profile_file(out, *p); !s.ok()) {
    print_error("profile", "%s\n", s.message().c_str());
    return 1;
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace

CLI::App* add_profile(CLI::App& app, int& exit_code) {
  static ProfileArgs a;
  auto* cmd = app.add_subcommand("profile", "Measure a TorchScript model's latency profile l(b) on a device");
  cmd->add_option("model", a.path, "TorchScript file (.pt)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--name", a.name, "model name (default: the file's stem)");
  cmd->add_option("--input", a.inputs, "input spec per input, e.g. float32[3,224,224]")->required();
  cmd->add_option("--device", a.device, "auto, cpu or cuda:N")->capture_default_str();
  cmd->add_option("--max-batch", a.max_batch, "largest batch to try")
      ->capture_default_str()
      ->check(CLI::Range(1u, 65536u));
  cmd->add_option("--repeats", a.repeats, "timed rounds (each runs every batch size once)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--max-latency-ms", a.max_latency_ms, "stop growing the batch past this latency")
      ->capture_default_str();
  cmd->add_option("--threads", a.threads, "CPU intra-op threads (default: libtorch's)");
  cmd->add_flag("--overlap", a.overlap,
                "CPU: time each batch as `serve --overlap on` runs it (the longer of its staging and its "
                "forward) instead of their sum");
  cmd->add_option("-o,--out", a.out,
                  "profile file to write (default: <model>.<device>.profile.yaml beside the model)");
  cmd->callback([&exit_code] { exit_code = run_profile(a); });
  return cmd;
}

}  // namespace symphony::tools
