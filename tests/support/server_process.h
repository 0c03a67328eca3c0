// A textgen-server child process on a free loopback port, for end-to-end tests: started from
// $TEXTGEN_BIN_DIR, ready once the standard gRPC health check reports SERVING, stopped with
// SIGTERM (the production shutdown path) when the object goes away.
#ifndef TEXTGEN_TESTS_SUPPORT_SERVER_PROCESS_H_
#define TEXTGEN_TESTS_SUPPORT_SERVER_PROCESS_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/child_process.h"

namespace textgen::testing {

struct ServerProcessOptions {
  // Model file or directory; empty = ModelPath("stories260K.gguf").
  std::string model;
  // Appended after --model and --listen, e.g. {"--max-queued", "1"}.
  std::vector<std::string> extra_args;
  // How long to wait for SERVING before failing the test.
  std::chrono::milliseconds startup_timeout{30000};
  // Added to the server's environment, e.g. {"TEXTGEN_MAX_QUEUED=1"}.
  std::vector<std::string> env;
  // Give the model, address and compute as TEXTGEN_MODEL / TEXTGEN_LISTEN / TEXTGEN_COMPUTE
  // instead of flags (the command line then holds only extra_args).
  bool flags_in_env = false;
  // How test channels (the readiness check's too) connect: nullptr = plain text; TLS
  // credentials for a server started with --tls-cert.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // false: return as soon as the health service answers at all (e.g. NOT_SERVING while the
  // model loads) instead of waiting for SERVING.
  bool wait_for_serving = true;
};

// Health states as the standard protocol numbers them (grpc.health.v1).
enum class HealthState { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

// One Check call; nullopt-like kUnknown plus `ok == false` when the RPC itself failed.
struct HealthReply {
  bool ok = false;  // the RPC succeeded
  HealthState state = HealthState::kUnknown;
  std::string error;  // the RPC's error when !ok
};
HealthReply CheckHealth(grpc::Channel& channel, const std::string& service,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(1000));

// Names the services the server's reflection lists (FAILs the test if the call fails).
std::vector<std::string> ListServicesViaReflection(grpc::Channel& channel);

class ServerProcess {
 public:
  // Starts the server and waits until it serves; FAILs the test (with the server's log) if it
  // cannot. Retries on a fresh port when the chosen one was taken in between.
  explicit ServerProcess(ServerProcessOptions options = {});
  // Stop() unless already stopped.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  // A channel to the server, shared by every caller (gRPC channels are thread-safe).
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  // A fresh channel (its own connection), e.g. to test many connections.
  std::shared_ptr<grpc::Channel> NewChannel() const;
  pid_t pid() const { return child_.pid(); }

  // Sends SIGTERM and waits up to `timeout` for the exit. Returns the exit code, 128 + signal
  // if a signal ended it, or -1 if it had to be killed (SIGKILL) after the timeout. A second
  // call returns the first result. With TEXTGEN_TEST_SERVER_LOG=1 the server's log is printed.
  int Stop(std::chrono::milliseconds timeout = std::chrono::milliseconds(20000));
  // Whether the process is still running (reaps it if it has exited).
  bool Running();
  // Everything the server wrote to stdout / stderr so far.
  std::string Log() const;

 private:
  // One attempt on one port; false (child reaped) if the server exited or never served.
  bool TryStart(const ServerProcessOptions& options, std::string* why);

  std::string address_;
  std::string log_path_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::shared_ptr<grpc::Channel> channel_;
  ChildProcess child_;
};

// Picks a loopback port that is free right now (bind to port 0, read it back, close).
int PickFreePort();

// A loopback port someone else listens on, for the tests of "port in use" messages: listening
// from construction until destruction.
class ListeningPort {
 public:
  ListeningPort();
  ~ListeningPort();
  ListeningPort(const ListeningPort&) = delete;
  ListeningPort& operator=(const ListeningPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A channel to `address` ("127.0.0.1:PORT") with its own connection and fast reconnects, for a
// server (or proxy) that may not listen yet; plain text unless `credentials` are given.
std::shared_ptr<grpc::Channel> NewTestChannel(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_SUPPORT_SERVER_PROCESS_H_
