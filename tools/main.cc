// symphony: deferred batch scheduling for DNN model serving.
#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "symphony/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"symphony: deferred batch scheduling for DNN model serving"};
  app.set_version_flag("--version", SYMPHONY_VERSION_STRING);
  app.require_subcommand(1);
  int exit_code = 0;
  symphony::tools::add_example(app, exit_code);
  symphony::tools::add_simulate(app, exit_code);
  symphony::tools::add_stress(app, exit_code);
  symphony::tools::add_partition(app, exit_code);
#ifdef SYMPHONY_HAVE_RDMA
  symphony::tools::add_scheduler(app, exit_code);
  symphony::tools::add_backend(app, exit_code);
  symphony::tools::add_loadgen(app, exit_code);
#endif
#ifdef SYMPHONY_HAVE_CLUSTER_FRONT
  symphony::tools::add_frontend(app, exit_code);
#endif
#ifdef SYMPHONY_HAVE_FRONT_CLIENT
  symphony::tools::add_load(app, exit_code);
#endif
#ifdef SYMPHONY_HAVE_SERVER
  symphony::tools::add_profile(app, exit_code);
#endif
#ifdef SYMPHONY_HAVE_SERVE
  symphony::tools::add_serve(app, exit_code);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end with CLI11's success code; every bad option,
    // missing argument or failed check exits 2, as for bad configs.
    const int code = app.exit(e);
    return code == static_cast<int>(CLI::ExitCodes::Success) ? 0 : 2;
  }
  return exit_code;
}
