// print_error (cli.hpp).
#include "cli.hpp"

#include <cstdarg>
#include <cstdio>

void symphony::tools::print_error(const char* command, const char* format, ...) {
  std::fprintf(stderr, "symphony %s: ", command);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
}
