// What every subcommand of the `symphony` tool prints its errors with.
#pragma once

namespace symphony::tools {

// Prints "symphony <command>: " and then the printf-style message on stderr,
// so that every subcommand's errors start the same way.
[[gnu::format(printf, 2, 3)]] void print_error(const char* command, const char* format, ...);

}  // namespace symphony::tools
