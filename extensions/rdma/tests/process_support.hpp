// Helpers for the multi-process cluster tests: start the real `symphony`
// binary (fork/exec), optionally inside a network namespace, with its output
// in a log file; signal it; wait for it with a timeout; and kill whatever is
// left when the test ends, however it ends.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace symphony::cluster::testing {

using namespace std::chrono_literals;

// A child process. The destructor SIGKILLs and reaps it if it still runs.
class Proc {
 public:
  Proc() = default;
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;
  Proc(Proc&& o) noexcept : pid_(o.pid_), log_(std::move(o.log_)), status_(o.status_) { o.pid_ = -1; }
  // The process this one held (if still running) is killed first.
  Proc& operator=(Proc&& o) noexcept {
    if (this != &o) {
      kill_now();
      pid_ = o.pid_;
      log_ = std::move(o.log_);
      status_ = o.status_;
      o.pid_ = -1;
    }
    return *this;
  }
  ~Proc() { kill_now(); }

  // Starts argv[0] with the rest as arguments, stdout and stderr into `log`.
  static Proc start(const std::vector<std::string>& argv, const std::string& log,
                    const std::vector<std::string>& env = {}) {
    Proc p;
    p.log_ = log;
    const pid_t pid = fork();
    if (pid == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    p.pid_ = pid;
    return p;
  }

  pid_t pid() const { return pid_; }
  bool running() {
    if (pid_ <= 0) return false;
    int st = 0;
    const pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      pid_ = -1;
      return false;
    }
    return r == 0;
  }
  void signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Waits up to `timeout` for the exit; returns the exit code, or nullopt if
  // it still runs (or died by a signal: -signal).
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (running()) {
      if (std::chrono::steady_clock::now() >= end) return std::nullopt;
      std::this_thread::sleep_for(5ms);
    }
    if (!status_) return std::nullopt;
    if (WIFEXITED(*status_)) return WEXITSTATUS(*status_);
    if (WIFSIGNALED(*status_)) return -WTERMSIG(*status_);
    return std::nullopt;
  }
  // SIGTERM, then SIGKILL after `grace`; returns the exit code if it exited.
  std::optional<int> stop(std::chrono::milliseconds grace = 5000ms) {
    signal(SIGTERM);
    std::optional<int> rc = wait(grace);
    if (running()) kill_now();
    return rc;
  }
  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
    status_ = st;
    pid_ = -1;
  }
  std::string log_text() const {
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  const std::string& log_path() const { return log_; }

 private:
  pid_t pid_ = -1;
  std::string log_;
  std::optional<int> status_;
};

// Polls `pred` every 10 ms until it holds or `timeout` passes.
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::optional<nlohmann::json> read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// A fresh directory under TMPDIR, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "symphony-cluster-XXXXXX").string();
    path_ = mkdtemp(t.data()) ? t : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty() && !std::getenv("SYMPHONY_KEEP_TEST_DIRS")) std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace symphony::cluster::testing
