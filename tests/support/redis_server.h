// A throwaway redis-server for tests (the session store's, and the server's end-to-end tests):
// a child of the test on a free loopback port, in a scratch directory, with nothing persisted,
// so a kill or restart leaves it empty.
#ifndef TEXTGEN_TESTS_SUPPORT_REDIS_SERVER_H_
#define TEXTGEN_TESTS_SUPPORT_REDIS_SERVER_H_

#include <memory>
#include <string>

#include "tests/support/child_process.h"

namespace textgen::testing {

// Where the tests expect redis-server (Debian's redis-server package installs it there).
inline constexpr char kRedisServerPath[] = "/usr/bin/redis-server";

// Not thread-safe: one test thread owns it.
class RedisServer {
 public:
  // Starts redis-server (--save "" --appendonly no) and waits until it answers PING. FAILs the
  // test, with its log, if the binary is missing (naming the package) or it does not come up.
  static std::unique_ptr<RedisServer> Start();
  // SIGKILL and reap.
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  // "redis://127.0.0.1:PORT/DB".
  std::string url(int db = 0) const;

  // SIGKILL and reap: connections drop, the port refuses.
  void Kill();
  // Kill() if running, then a new, empty server on the same port; FAILs if it does not come up.
  void Restart();
  // SIGSTOP / SIGCONT: while paused the kernel still accepts connections but nothing answers
  // (a hung server).
  void Pause();
  void Resume();

  // Everything the server wrote (its log), for failure messages.
  std::string Log() const;

 private:
  RedisServer() = default;
  // One start on port_; false (with `why`) if it exited or did not answer in time.
  bool Launch(std::string* why);

  std::string dir_;
  int port_ = 0;
  ChildProcess child_;
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_SUPPORT_REDIS_SERVER_H_
