// A child process for end-to-end tests (a server, a proxy): started with execve, its output
// appended to a log file, killed with the test process, stopped by a signal and then SIGKILL.
#ifndef TEXTGEN_TESTS_SUPPORT_CHILD_PROCESS_H_
#define TEXTGEN_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace textgen::testing {

// Not thread-safe: one test thread owns it.
class ChildProcess {
 public:
  ChildProcess() = default;
  // SIGKILL and reap if still running: no process outlives its owner, even when a REQUIRE
  // fails while it runs.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Runs argv[0] (a path) with `env` before the test's own environment (getenv takes the first
  // of duplicate names), stdout and stderr appended to `log_path`. The kernel SIGKILLs the
  // child if the test process dies first. A previous child must have exited. FAILs the test if
  // the log cannot be opened or fork fails; an exec failure shows as exit code 127.
  void Start(const std::vector<std::string>& argv, const std::vector<std::string>& env,
             const std::string& log_path);

  // Whether the child is still running (reaps it if it has exited).
  bool Running();
  // Polls until the child exits or `deadline` passes; true when it exited.
  bool WaitExit(std::chrono::steady_clock::time_point deadline);
  // Sends `signal` and waits up to `timeout`, then SIGKILLs. Returns the exit code, 128 + signal
  // if a signal ended it, or -1 if it had to be killed after the timeout (or never started).
  // Once exited, returns the same result again.
  int Stop(int signal, std::chrono::milliseconds timeout);

  pid_t pid() const { return pid_; }
  // Meaningful once Running() returned false.
  int exit_code() const { return exit_code_; }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_SUPPORT_CHILD_PROCESS_H_
