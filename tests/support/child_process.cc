#include "tests/support/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

namespace textgen::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && Running()) {
    ::kill(pid_, SIGKILL);
    WaitExit(Clock::now() + milliseconds(5000));
  }
}

void ChildProcess::Start(const std::vector<std::string>& argv_in,
                         const std::vector<std::string>& env_in, const std::string& log_path) {
  REQUIRE(!argv_in.empty());
  REQUIRE(!Running());
  std::vector<std::string> args = argv_in;
  std::vector<std::string> env = env_in;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) FAIL("cannot open " << log_path);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // A crashed or killed test run must not leave children behind.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(log_fd);
  pid_ = pid;
  exited_ = false;
  exit_code_ = -1;
}

bool ChildProcess::Running() {
  if (pid_ <= 0 || exited_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  exited_ = true;
  if (r == pid_ && WIFEXITED(status)) {
    exit_code_ = WEXITSTATUS(status);
  } else if (r == pid_ && WIFSIGNALED(status)) {
    exit_code_ = 128 + WTERMSIG(status);
  }
  return false;
}

bool ChildProcess::WaitExit(Clock::time_point deadline) {
  while (Running()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

int ChildProcess::Stop(int signal, milliseconds timeout) {
  if (pid_ <= 0) return -1;
  if (exited_ || !Running()) return exit_code_;
  ::kill(pid_, signal);
  if (!WaitExit(Clock::now() + timeout)) {
    ::kill(pid_, SIGKILL);
    WaitExit(Clock::now() + milliseconds(5000));
    exit_code_ = -1;
  }
  return exit_code_;
}

}  // namespace textgen::testing
