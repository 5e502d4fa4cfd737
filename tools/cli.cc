// print_error, exit_for and block_stop_signals (cli.hpp).
#include "cli.hpp"

#include <pthread.h>

#include <cstdarg>
#include <cstdio>

void symphony::tools::print_error(const char* command, const char* format, ...) {
  std::fprintf(stderr, "symphony %s: ", command);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
}

int symphony::tools::exit_for(const char* command, const Status& s) {
  if (s.code() == Errc::kInvalidArgument) {
    print_error(command, "%s\n", s.message().c_str());
    return 2;
  }
  print_error(command, "error: %s\n", s.message().c_str());
  return 1;
}

sigset_t symphony::tools::block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}
