// What every subcommand of the `symphony` tool prints its errors with, and
// how the long-running ones wait for SIGINT/SIGTERM.
#pragma once

#include <csignal>

#include "symphony/status.hpp"

namespace symphony::tools {

// Prints "symphony <command>: " and then the printf-style message on stderr,
// so that every subcommand's errors start the same way.
[[gnu::format(printf, 2, 3)]] void print_error(const char* command, const char* format, ...);

// Prints a failed Status and returns the command's exit code: 2 for input it
// cannot use (kInvalidArgument: a config, a file, an option; the message as
// is), 1 for anything else (after "error: ").
int exit_for(const char* command, const Status& s);

// SIGINT and SIGTERM, blocked in the calling thread: call it before any
// thread starts, so that every thread inherits the mask and the main thread
// alone takes them (sigwait, or wait_for_stop() in front_cli.hpp).
sigset_t block_stop_signals();

}  // namespace symphony::tools
