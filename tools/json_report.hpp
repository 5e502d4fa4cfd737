// `--json FILE`: one convention for the JSON report of every command.
//
// `--json FILE` writes the report to FILE; `--json -` writes it to standard
// output, and then the report is the only thing there: whatever else the
// command prints on standard output (tables, summaries, a solver's log) goes
// to standard error, so `symphony <command> ... --json - | python3 -m
// json.tool` works. A bare `--json` (no FILE) means `--json -`, so the old
// `simulate ... --json` and `stress ... --json` still print the report.
#pragma once

#include <CLI/CLI.hpp>

#include <fstream>
#include <memory>
#include <ostream>
#include <streambuf>
#include <string>

namespace symphony::tools {

// The help text of --json, the same on every command.
inline constexpr const char* kJsonHelp =
    "write the JSON report to FILE ('-', or no FILE: to standard output, and the rest of the output to "
    "standard error)";

// Adds `--json FILE` (help kJsonHelp) to `cmd`; FILE is stored in `path`, "-"
// when --json is given without one.
CLI::Option* add_json_option(CLI::App* cmd, std::string& path);

// Adds a deprecated alias of --json (e.g. "--report") that stores FILE in
// `path`; a command that sees it set calls deprecated_alias_notice().
CLI::Option* add_deprecated_json_alias(CLI::App* cmd, const std::string& name, std::string& path);

// Prints the one-line notice that `old_flag` is deprecated in favour of
// --json FILE on standard error.
void deprecated_alias_notice(const char* command, const char* old_flag);

// Where a command's report goes. Construct it first thing in the command,
// before anything is printed: with "-" it moves standard output to standard
// error (file descriptor 1 becomes a copy of 2) until it is destroyed, and
// keeps the real standard output for the report. With a file, the file is
// opened (and truncated) only when the report is written, so a command may
// read a file it is about to replace (`partition --current r.json --json
// r.json`). With "" there is no report.
class JsonReport {
 public:
  explicit JsonReport(std::string path);
  ~JsonReport();
  JsonReport(const JsonReport&) = delete;
  JsonReport& operator=(const JsonReport&) = delete;

  bool enabled() const noexcept { return !path_.empty(); }
  bool to_stdout() const noexcept { return path_ == "-"; }
  const std::string& path() const noexcept { return path_; }
  // "standard output" or the file's name, for messages.
  std::string where() const { return to_stdout() ? "standard output" : path_; }

  // The stream the report goes to, unbuffered (what is written is there at
  // once): the kept standard output, or the file, opened on the first call
  // and closed with this object. Check it after writing.
  std::ostream& stream();
  // Writes `text`: to the kept standard output, or as the whole of the file
  // (a later call replaces it); on failure prints "symphony <command>:
  // cannot write the report to <where>: <reason>" and returns false.
  bool write(const char* command, const std::string& text);

 private:
  std::string path_;
  int saved_stdout_ = -1;
  std::unique_ptr<std::streambuf> buf_;
  std::unique_ptr<std::ostream> out_;
};

}  // namespace symphony::tools
