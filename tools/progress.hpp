// A progress line for the CLI's long-running commands: rewritten in place on
// a terminal; on anything else (a log file, a pipe, CI) one plain line per
// update, so that a log never holds one endless line of carriage returns.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace symphony::tools {

class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* out = stderr) : out_(out), tty_(isatty(fileno(out)) != 0) {}
  ~ProgressLine() { finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Shows `text` as the current progress.
  void update(const std::string& text) {
    if (tty_)
      std::fprintf(out_, "\r\033[K%s", text.c_str());
    else
      std::fprintf(out_, "%s\n", text.c_str());
    std::fflush(out_);
    shown_ = true;
  }
  // Ends the line on a terminal (later output starts on a line of its own).
  void finish() {
    if (tty_ && shown_) std::fputc('\n', out_);
    shown_ = false;
  }
  bool tty() const noexcept { return tty_; }

 private:
  std::FILE* out_;
  bool tty_;
  bool shown_ = false;
};

}  // namespace symphony::tools
