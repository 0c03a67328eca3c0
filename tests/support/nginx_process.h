// nginx running the project's gRPC load-balancer configuration (docker/nginx/) in front of
// replicas on loopback, for end-to-end tests: a foreground child of the test with everything it
// writes (pid, logs, temp files) in a scratch prefix, so it runs as root or not.
#ifndef TEXTGEN_TESTS_SUPPORT_NGINX_PROCESS_H_
#define TEXTGEN_TESTS_SUPPORT_NGINX_PROCESS_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/child_process.h"

namespace textgen::testing {

// Where the test expects nginx (Debian's nginx-light installs it there).
inline constexpr char kNginxPath[] = "/usr/sbin/nginx";

class NginxProcess {
 public:
  // Writes a top-level nginx.conf that includes the project's docker/nginx/textgen.conf, plus
  // the project's replicas.conf and listen.conf with only their addresses replaced (by
  // `replicas`, in order, and a free loopback port), starts nginx and waits until a gRPC
  // health check through it answers SERVING. FAILs the test, with nginx's log, if nginx is
  // missing (naming the package), the project's files do not have one server line per
  // replica and one listen line, or nginx does not come up within `startup_timeout`.
  explicit NginxProcess(const std::vector<std::string>& replicas,
                        std::chrono::milliseconds startup_timeout = std::chrono::seconds(10));
  // Stops nginx (SIGTERM, then SIGKILL).
  ~NginxProcess();
  NginxProcess(const NginxProcess&) = delete;
  NginxProcess& operator=(const NginxProcess&) = delete;

  // "127.0.0.1:PORT" that clients connect to.
  const std::string& address() const { return address_; }
  // A fresh channel to nginx (its own connection).
  std::shared_ptr<grpc::Channel> NewChannel() const;
  // nginx's own messages (startup errors, failed upstream connects).
  std::string ErrorLog() const;
  // One line per call in docker/nginx/textgen.conf's `textgen` format: which replica served
  // it, its grpc-status and its session, for failure messages.
  std::string AccessLog() const;

 private:
  // One attempt on one port; false (nginx reaped) if nginx exited or never served.
  bool TryStart(const std::vector<std::string>& replicas, std::chrono::milliseconds timeout,
                std::string* why);

  std::string prefix_;
  std::string address_;
  ChildProcess child_;
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_SUPPORT_NGINX_PROCESS_H_
