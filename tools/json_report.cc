// `--json FILE` on every command (json_report.hpp).
#include "json_report.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "cli.hpp"

namespace symphony::tools {
namespace {

// An unbuffered stream buffer that writes to a file descriptor.
class FdBuf : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    return put(&ch, 1) ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override { return put(s, n) ? n : 0; }

 private:
  bool put(const char* s, std::streamsize n) {
    while (n > 0) {
      const ssize_t k = ::write(fd_, s, static_cast<std::size_t>(n));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      s += k;
      n -= k;
    }
    return true;
  }
  int fd_;
};

}  // namespace

CLI::Option* add_json_option(CLI::App* cmd, std::string& path) {
  // A report is never YAML: `simulate --json config.yaml -q`, the old bare
  // --json before the config, would otherwise take the config as FILE.
  const CLI::Validator not_yaml(
      [](std::string& file) -> std::string {
        for (const char* ext : {".yaml", ".yml"}) {
          const std::string e = ext;
          if (file.size() > e.size() && file.compare(file.size() - e.size(), e.size(), e) == 0)
            return "'" + file +
                   "' looks like a config, not a report (for the report on standard output, write --json -)";
        }
        return {};
      },
      "", "not_yaml");
  // expected(0, 1): a bare --json takes the default string, "-". (CLI11 does
  // not take a required positional still missing as FILE: `simulate --json
  // config.yaml` reads config.yaml.)
  return cmd->add_option("--json", path, kJsonHelp)
      ->expected(0, 1)
      ->default_str("-")
      ->check(not_yaml)
      ->option_text("FILE");
}

CLI::Option* add_deprecated_json_alias(CLI::App* cmd, const std::string& name, std::string& path) {
  return cmd->add_option(name, path, "deprecated: the same as --json FILE")->group("Deprecated");
}

void deprecated_alias_notice(const char* command, const char* old_flag) {
  std::fprintf(stderr, "symphony %s: %s FILE is deprecated and will be removed; write --json FILE\n", command,
               old_flag);
}

JsonReport::JsonReport(std::string path) : path_(std::move(path)) {
  if (!to_stdout()) return;
  std::cout.flush();
  std::fflush(stdout);
  saved_stdout_ = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (saved_stdout_ >= 0) {
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines keep their order with what goes to stderr
  }
}

JsonReport::~JsonReport() {
  if (out_) out_->flush();
  out_.reset();
  buf_.reset();
  if (saved_stdout_ >= 0) {
    std::cout.flush();
    std::fflush(stdout);
    ::dup2(saved_stdout_, STDOUT_FILENO);
    ::close(saved_stdout_);
  }
}

std::ostream& JsonReport::stream() {
  if (out_) return *out_;
  if (to_stdout()) {
    if (saved_stdout_ >= 0) buf_ = std::make_unique<FdBuf>(saved_stdout_);
    out_ = std::make_unique<std::ostream>(buf_.get());  // a null buffer: badbit, every write fails
  } else {
    auto f = std::make_unique<std::ofstream>();
    f->rdbuf()->pubsetbuf(nullptr, 0);  // unbuffered: what is written is in the file at once
    f->open(path_);
    out_ = std::move(f);
  }
  return *out_;
}

bool JsonReport::write(const char* command, const std::string& text) {
  errno = 0;
  bool ok;
  if (to_stdout()) {
    std::ostream& f = stream();
    f << text;
    f.flush();
    ok = static_cast<bool>(f);
  } else {  // the whole file, closed, so that closing's errors count too
    std::ofstream f(path_);
    f << text;
    f.close();
    ok = static_cast<bool>(f);
  }
  if (!ok) {
    const int e = errno;
    print_error(command, "cannot write the report to %s%s%s\n", where().c_str(), e ? ": " : "",
                e ? std::strerror(e) : "");
  }
  return ok;
}

}  // namespace symphony::tools
