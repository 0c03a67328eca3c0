#include "tests/support/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "tests/test_util.h"

namespace textgen::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// $TEXTGEN_BIN_DIR, else the folder of this test binary (CMake puts every binary in bin/).
std::string BinDir() {
  const char* env = std::getenv("TEXTGEN_BIN_DIR");
  if (env != nullptr && *env != '\0') return env;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) FAIL("TEXTGEN_BIN_DIR is not set and /proc/self/exe is unreadable");
  return self.parent_path().string();
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

HealthReply CheckHealth(grpc::Channel& channel, const std::string& service, milliseconds timeout) {
  // The stub needs a shared_ptr; the caller keeps the channel alive for the call's duration.
  std::shared_ptr<grpc::Channel> borrowed(&channel, [](grpc::Channel*) {});
  auto stub = grpc::health::v1::Health::NewStub(borrowed);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status st = stub->Check(&ctx, req, &resp);
  HealthReply r;
  r.ok = st.ok();
  if (st.ok()) {
    r.state = static_cast<HealthState>(resp.status());
  } else {
    r.error = std::to_string(st.error_code()) + ": " + st.error_message();
  }
  return r;
}

std::vector<std::string> ListServicesViaReflection(grpc::Channel& channel) {
  std::shared_ptr<grpc::Channel> borrowed(&channel, [](grpc::Channel*) {});
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(borrowed);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(5000));
  auto stream = stub->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("");
  REQUIRE(stream->Write(req));
  stream->WritesDone();
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  std::vector<std::string> names;
  while (stream->Read(&resp)) {
    for (const auto& s : resp.list_services_response().service()) names.push_back(s.name());
  }
  grpc::Status st = stream->Finish();
  INFO("reflection: " << st.error_code() << " " << st.error_message());
  REQUIRE(st.ok());
  return names;
}

ServerProcess::ServerProcess(ServerProcessOptions options) {
  // A synchronous gRPC client only polls an idle connection from its backup poller (every 5 s
  // by default), so connecting to a fresh server and noticing its GOAWAY at shutdown would each
  // take seconds. Read once by grpc_init: effective if no channel was made before this point.
  ::setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "20", /*overwrite=*/0);
  if (options.model.empty()) options.model = ModelPath("stories260K.gguf");
  log_path_ = ScratchDir() + "/server.log";
  std::string why;
  // A port picked free can be taken before the server binds it; a few tries make that moot.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (TryStart(options, &why)) return;
  }
  FAIL("textgen-server did not start: " << why << "\n--- server log ---\n" << Log());
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exited_) Stop();
}

bool ServerProcess::TryStart(const ServerProcessOptions& options, std::string* why) {
  const int port = PickFreePort();
  address_ = "127.0.0.1:" + std::to_string(port);
  const std::string bin = BinDir() + "/textgen-server";
  if (::access(bin.c_str(), X_OK) != 0) FAIL("not an executable: " << bin);
  // Exact arithmetic, so that tests can compare with llama.cpp's references and textgen-run
  // (a test's extra_args may say otherwise: the last flag wins).
  std::vector<std::string> args = {bin};
  // The test's variables first: getenv takes the first of duplicate names.
  std::vector<std::string> env = options.env;
  if (options.flags_in_env) {
    env.insert(env.end(), {"TEXTGEN_MODEL=" + options.model, "TEXTGEN_LISTEN=" + address_,
                           "TEXTGEN_COMPUTE=f32"});
  } else {
    args.insert(args.end(), {"--model", options.model, "--listen", address_, "--compute", "f32"});
  }
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  REQUIRE(log_fd >= 0);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // A crashed or killed test run must not leave servers behind.
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
  channel_ = NewChannel();

  const auto deadline = Clock::now() + options.startup_timeout;
  while (Clock::now() < deadline) {
    if (!Running()) {
      *why = "exited with code " + std::to_string(exit_code_) + " before serving";
      return false;
    }
    HealthReply h = CheckHealth(*channel_, "", milliseconds(500));
    if (h.ok && (h.state == HealthState::kServing || !options.wait_for_serving)) return true;
    *why = h.ok ? "health state " + std::to_string(static_cast<int>(h.state)) : h.error;
    std::this_thread::sleep_for(milliseconds(50));
  }
  *why = "not SERVING within " + std::to_string(options.startup_timeout.count()) + " ms (" + *why +
         ")";
  ::kill(pid_, SIGKILL);
  WaitExit(Clock::now() + milliseconds(5000));
  return false;
}

std::shared_ptr<grpc::Channel> ServerProcess::NewChannel() const {
  grpc::ChannelArguments args;
  // A distinct argument keeps gRPC from sharing one subchannel among all channels.
  static std::atomic<int> counter{0};
  args.SetInt("textgen.test.channel_id", counter.fetch_add(1));
  // Connection attempts fail until the server listens; gRPC's default reconnect backoff (1 s,
  // growing) would add seconds to every startup.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  return grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
}

bool ServerProcess::Running() {
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

bool ServerProcess::WaitExit(Clock::time_point deadline) {
  while (Running()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

int ServerProcess::Stop(milliseconds timeout) {
  if (pid_ <= 0) return -1;
  if (exited_ || !Running()) return exit_code_;
  ::kill(pid_, SIGTERM);
  if (!WaitExit(Clock::now() + timeout)) {
    ::kill(pid_, SIGKILL);
    WaitExit(Clock::now() + milliseconds(5000));
    exit_code_ = -1;
  }
  // Debugging aid: TEXTGEN_TEST_SERVER_LOG=1 prints what the server logged.
  if (const char* dump = std::getenv("TEXTGEN_TEST_SERVER_LOG"); dump != nullptr && *dump == '1') {
    std::fprintf(stderr, "--- textgen-server %s (exit %d) ---\n%s", address_.c_str(), exit_code_,
                 Log().c_str());
  }
  return exit_code_;
}

std::string ServerProcess::Log() const { return ReadWholeFile(log_path_); }

}  // namespace textgen::testing
