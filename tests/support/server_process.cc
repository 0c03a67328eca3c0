#include "tests/support/server_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
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

ListeningPort::ListeningPort() {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd_ >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(fd_, 4) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  port_ = ntohs(addr.sin_port);
}

ListeningPort::~ListeningPort() { ::close(fd_); }

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
  credentials_ = options.credentials;
  log_path_ = ScratchDir() + "/server.log";
  std::string why;
  // A port picked free can be taken before the server binds it; a few tries make that moot.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (TryStart(options, &why)) return;
  }
  FAIL("textgen-server did not start: " << why << "\n--- server log ---\n" << Log());
}

ServerProcess::~ServerProcess() { Stop(); }

bool ServerProcess::TryStart(const ServerProcessOptions& options, std::string* why) {
  const int port = PickFreePort();
  address_ = "127.0.0.1:" + std::to_string(port);
  const std::string bin = BinDir() + "/textgen-server";
  if (::access(bin.c_str(), X_OK) != 0) FAIL("not an executable: " << bin);
  // Exact arithmetic, so that tests can compare with llama.cpp's references and textgen-run
  // (a test's extra_args may say otherwise: the last flag wins).
  std::vector<std::string> args = {bin};
  std::vector<std::string> env = options.env;
  if (options.flags_in_env) {
    env.insert(env.end(), {"TEXTGEN_MODEL=" + options.model, "TEXTGEN_LISTEN=" + address_,
                           "TEXTGEN_COMPUTE=f32"});
  } else {
    args.insert(args.end(), {"--model", options.model, "--listen", address_, "--compute", "f32"});
  }
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  child_.Start(args, env, log_path_);
  channel_ = NewChannel();

  const auto deadline = Clock::now() + options.startup_timeout;
  while (Clock::now() < deadline) {
    if (!child_.Running()) {
      *why = "exited with code " + std::to_string(child_.exit_code()) + " before serving";
      return false;
    }
    HealthReply h = CheckHealth(*channel_, "", milliseconds(500));
    if (h.ok && (h.state == HealthState::kServing || !options.wait_for_serving)) return true;
    *why = h.ok ? "health state " + std::to_string(static_cast<int>(h.state)) : h.error;
    std::this_thread::sleep_for(milliseconds(50));
  }
  *why = "not SERVING within " + std::to_string(options.startup_timeout.count()) + " ms (" + *why +
         ")";
  child_.Stop(SIGKILL, milliseconds(5000));
  return false;
}

std::shared_ptr<grpc::Channel> ServerProcess::NewChannel() const {
  return NewTestChannel(address_, credentials_);
}

std::shared_ptr<grpc::Channel> NewTestChannel(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  // A distinct argument keeps gRPC from sharing one subchannel among all channels.
  static std::atomic<int> counter{0};
  args.SetInt("textgen.test.channel_id", counter.fetch_add(1));
  // Connection attempts fail until the server listens; gRPC's default reconnect backoff (1 s,
  // growing) would add seconds to every startup.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  return grpc::CreateCustomChannel(address, credentials, args);
}

bool ServerProcess::Running() { return child_.Running(); }

int ServerProcess::Stop(milliseconds timeout) {
  const bool was_running = child_.Running();
  const int code = child_.Stop(SIGTERM, timeout);
  // Debugging aid: TEXTGEN_TEST_SERVER_LOG=1 prints what the server logged.
  if (const char* dump = std::getenv("TEXTGEN_TEST_SERVER_LOG");
      was_running && dump != nullptr && *dump == '1') {
    std::fprintf(stderr, "--- textgen-server %s (exit %d) ---\n%s", address_.c_str(), code,
                 Log().c_str());
  }
  return code;
}

std::string ServerProcess::Log() const { return ReadWholeFile(log_path_); }

}  // namespace textgen::testing
