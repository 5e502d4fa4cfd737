// What every subcommand of the `symphony` tool prints its errors with.
#pragma once

#include "symphony/status.hpp"

namespace symphony::tools {

// Prints "symphony <command>: " and then the printf-style message on stderr,
// so that every subcommand's errors start the same way.
[[gnu::format(printf, 2, 3)]] void print_error(const char* command, const char* format, ...);

// Prints a failed Status and returns the command's exit code: 2 for input it
// cannot use (kInvalidArgument: a config, a file, an option; the message as
// is), 1 for anything else (after "error: ").
int exit_for(const char* command, const Status& s);

}  // namespace symphony::tools
