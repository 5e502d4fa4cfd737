// symphony: deferred batch scheduling for DNN model serving.
#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "symphony/config.hpp"

int main(int argc, char** argv) {
  CLI::App app{"symphony: deferred batch scheduling for DNN model serving"};
  app.set_version_flag("--version", SYMPHONY_VERSION_STRING);
  app.require_subcommand(1);
  int exit_code = 0;
  symphony::tools::add_example(app, exit_code);
  symphony::tools::add_simulate(app, exit_code);
  symphony::tools::add_stress(app, exit_code);
#ifdef SYMPHONY_HAVE_RDMA
  symphony::tools::add_scheduler(app, exit_code);
  symphony::tools::add_backend(app, exit_code);
  symphony::tools::add_loadgen(app, exit_code);
#endif
#ifdef SYMPHONY_HAVE_SERVER
  symphony::tools::add_profile(app, exit_code);
  symphony::tools::add_serve(app, exit_code);
#endif
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
