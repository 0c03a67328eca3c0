// The server as a process: health, reflection, model info, and SIGTERM with streams in flight.
#include <httplib.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "engine/ops/kernel_select.h"
#include "tests/server/openai_test_util.h"
#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace lifecycle_test {

TEST_CASE("health reports SERVING for the server and the service", "[server][lifecycle]") {
  ServerProcess& server = SharedServer();
  for (const std::string service : {"", "textgen.v1.TextGeneration"}) {
    INFO("service \"" << service << "\"");
    HealthReply h = CheckHealth(*server.channel(), service);
    INFO(h.error);
    REQUIRE(h.ok);
    CHECK(h.state == HealthState::kServing);
  }
}

TEST_CASE("server reflection lists the services", "[server][lifecycle]") {
  std::vector<std::string> names = ListServicesViaReflection(*SharedServer().channel());
  CHECK_THAT(names, Catch::VectorContains(std::string("textgen.v1.TextGeneration")));
  CHECK_THAT(names, Catch::VectorContains(std::string("grpc.health.v1.Health")));
}

TEST_CASE("GetModelInfo describes stories260K and the KV pool", "[server][lifecycle]") {
  auto stub = NewStub(SharedServer());
  const v1::ModelInfo info = GetInfo(*stub);
  CHECK(info.architecture() == "llama");
  CHECK(info.vocab_size() == 512);
  CHECK(info.context_length() > 0);
  CHECK(info.bos_id() == 1);
  CHECK(info.eos_id() == 2);
  // stories260K's only end-of-generation token is its EOS "</s>".
  CHECK(std::vector<int32_t>(info.eog_token_ids().begin(), info.eog_token_ids().end()) ==
        std::vector<int32_t>{2});
  CHECK(info.weight_type() == "F32");
  CHECK(info.format() == "gguf");
  CHECK(info.kv_block_size() == 16);
  CHECK(info.kv_blocks_total() > 0);
  CHECK(info.kv_blocks_free() <= info.kv_blocks_total());
  CHECK(info.embedding_length() > 0);
  CHECK(info.block_count() == 5);
  CHECK(info.head_count() > 0);
  CHECK(info.head_count_kv() > 0);
}

TEST_CASE("SIGTERM with an endless stream in flight: exit 0 once the grace has passed",
          "[server][lifecycle]") {
  ServerProcessOptions o;
  o.extra_args = {"--shutdown-grace",       "2",           "--max-max-new-tokens",
                  std::to_string(kEndless), "--log-level", "warn"};
  ServerProcess server(o);
  auto stub = NewStub(server);
  const v1::GenerateRequest endless = EndlessRequest();

  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, endless);
  v1::GenerateResponse msg;
  REQUIRE(reader->Read(&msg));  // in flight

  const auto start = std::chrono::steady_clock::now();
  const int code = server.Stop(std::chrono::seconds(10));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(code == 0);
  CHECK(seconds < 2.0 + 1.5);  // the grace plus a margin for the engine to stop
  while (reader->Read(&msg)) {
  }
  const grpc::Status st = reader->Finish();
  INFO(st.error_code() << ": " << st.error_message());
  CHECK(!st.ok());  // cut short by the shutdown
}

TEST_CASE("while draining health is not SERVING and new calls are refused",
          "[server][lifecycle][readiness]") {
  const int metrics_port = PickFreePort();
  int http_port = PickFreePort();
  while (http_port == metrics_port) http_port = PickFreePort();
  ServerProcessOptions o;
  o.extra_args = {"--shutdown-grace",     "3",
                  "--max-max-new-tokens", std::to_string(kEndless),
                  "--metrics-listen",     "127.0.0.1:" + std::to_string(metrics_port),
                  "--http-listen",        "127.0.0.1:" + std::to_string(http_port),
                  "--log-level",          "warn"};
  ServerProcess server(o);
  auto stub = NewStub(server);
  const v1::GenerateRequest endless = EndlessRequest();
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, endless);
  v1::GenerateResponse msg;
  REQUIRE(reader->Read(&msg));  // in flight: it holds the drain open for the whole grace

  ::kill(server.pid(), SIGTERM);
  // The state flips at once; the metrics endpoint keeps answering until the drain ends.
  bool drained_metrics = false;
  for (int i = 0; i < 100 && !drained_metrics; ++i) {
    httplib::Client client("127.0.0.1", metrics_port);
    auto res = client.Get("/metrics");
    drained_metrics = res && res->body.find("textgen_serving 0") != std::string::npos;
    if (!drained_metrics) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(drained_metrics);
  // Routers' readiness probe on the HTTP listener, which answers until the drain ends: 503.
  const HttpReply ready = Get(http_port, "/ready");
  CHECK(ready.status == 503);
  CHECK(ready.json.value("status", "") == "draining");
  CHECK(Get(http_port, "/health").status == 200);  // alive all the same
  // A probe (on the open connection, or a new one: the listener is closed) never sees
  // SERVING: NOT_SERVING or an error, so load balancers and kubelets take the replica out.
  HealthReply h = CheckHealth(*server.channel(), "");
  INFO(h.error);
  CHECK((!h.ok || h.state == HealthState::kNotServing));
  h = CheckHealth(*server.NewChannel(), "");
  INFO(h.error);
  CHECK((!h.ok || h.state == HealthState::kNotServing));
  // New work is refused with UNAVAILABLE (a client or balancer may retry it elsewhere).
  // Fail-fast (no wait_for_ready) and a deadline inside the grace, so only a refusal passes.
  {
    grpc::ClientContext late;
    late.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::GenerateRequest req;
    req.set_prompt("Once");
    req.set_max_new_tokens(2);
    auto late_reader = stub->Generate(&late, req);
    v1::GenerateResponse ignored;
    CHECK_FALSE(late_reader->Read(&ignored));
    const grpc::Status st = late_reader->Finish();
    INFO(st.error_code() << ": " << st.error_message());
    CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
  }
  // Meanwhile the stream in flight still gets tokens.
  CHECK(reader->Read(&msg));
  CHECK(server.Stop(std::chrono::seconds(10)) == 0);
  while (reader->Read(&msg)) {
  }
  CHECK(!reader->Finish().ok());  // cut at the end of the grace
}

// Counts the lines of `log` that contain `part`.
int CountLines(const std::string& log, const std::string& part) {
  int n = 0;
  for (size_t pos = log.find(part); pos != std::string::npos; pos = log.find(part, pos + 1)) ++n;
  return n;
}

TEST_CASE(
    "streams cut by the shutdown are logged and counted as UNAVAILABLE, not as cancelled "
    "by their client",
    "[server][lifecycle]") {
  ServerProcessOptions o;
  o.extra_args = {"--shutdown-grace",       "1",           "--max-max-new-tokens",
                  std::to_string(kEndless), "--log-level", "info"};
  ServerProcess server(o);
  auto stub = NewStub(server);
  v1::GenerateResponse msg;
  {
    // One stream its client cancels...
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, EndlessRequest());
    REQUIRE(reader->Read(&msg));
    ctx.TryCancel();
    while (reader->Read(&msg)) {
    }
    CHECK(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
  }
  // ...and one still running when the grace ends.
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, EndlessRequest());
  REQUIRE(reader->Read(&msg));
  CHECK(server.Stop(std::chrono::seconds(10)) == 0);
  while (reader->Read(&msg)) {
  }
  const grpc::Status st = reader->Finish();
  INFO(st.error_code() << ": " << st.error_message());
  CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
  const std::string log = server.Log();
  INFO(log);
  CHECK(CountLines(log, "finish=client_gone status=CANCELLED cancelled by the client") == 1);
  CHECK(CountLines(log, "finish=server_shutdown status=UNAVAILABLE the server is shutting down") ==
        1);
}

TEST_CASE("SIGTERM with a short stream in flight lets it complete", "[server][lifecycle]") {
  ServerProcessOptions o;
  // A grace far above the stream's length (~1 s; 6 s seen under ASan on a loaded machine), so
  // only a drain that cuts streams early fails this.
  o.extra_args = {"--shutdown-grace", "60", "--log-level", "info"};
  ServerProcess server(o);
  auto stub = NewStub(server);
  v1::GenerateRequest req;
  req.set_prompt("Once upon a time");
  req.set_max_new_tokens(200);
  // Slow on purpose (every step recomputes the whole sequence) so SIGTERM lands mid-stream.
  req.set_use_cache(false);
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, req);
  v1::GenerateResponse msg;
  REQUIRE(reader->Read(&msg));
  ::kill(server.pid(), SIGTERM);
  int tokens = msg.tokens_size();
  v1::GenerateResponse last;
  while (reader->Read(&msg)) {
    tokens += msg.tokens_size();
    last = msg;
  }
  const grpc::Status st = reader->Finish();
  INFO(st.error_code() << ": " << st.error_message());
  CHECK(server.Stop() == 0);
  // The server's log, should the stream end early (seen once in ~60 runs: UNAVAILABLE "Socket
  // closed" 0.19 s after the start; not reproduced since).
  INFO(server.Log());
  CHECK(st.ok());
  CHECK(last.finish_reason() != v1::FINISH_REASON_UNSPECIFIED);
  CHECK(last.finish_reason() != v1::CANCELLED);
}

TEST_CASE("textgen-server --kv-type: auto follows --compute, bf16 doubles the blocks",
          "[server][lifecycle]") {
  struct Case {
    std::vector<std::string> args;
    const char* type;  // as the startup log names it
  };
  const Case cases[] = {
      {{"--kv-type", "f32"}, "f32"},
      {{"--compute", "bf16"}, "bf16"},  // auto
      {{"--compute", "bf16", "--kv-type", "f32"}, "f32"},
      {{"--kv-type", "bf16"}, "bf16"},
  };
  uint32_t f32_blocks = 0, bf16_blocks = 0;
  for (const Case& c : cases) {
    ServerProcessOptions o;
    o.extra_args = c.args;
    o.extra_args.insert(o.extra_args.end(), {"--kv-cache-mib", "4"});
    ServerProcess server(o);
    auto stub = NewStub(server);
    const uint32_t blocks = GetInfo(*stub).kv_blocks_total();
    (std::string(c.type) == "bf16" ? bf16_blocks : f32_blocks) = blocks;
    v1::GenerateRequest req;
    req.set_prompt("Once upon a time");
    req.set_max_new_tokens(20);
    StreamResult r = RunGenerate(*stub, req);
    INFO(r.status.error_message());
    REQUIRE(r.status.ok());
    CHECK(r.ids.size() == 20);
    CHECK(server.Stop() == 0);
    CHECK_THAT(server.Log(), Catch::Contains("blocks of 16 tokens (" + std::string(c.type) + ")"));
  }
  CHECK(f32_blocks > 0);
  CHECK(bf16_blocks >= 2 * f32_blocks);

  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  CommandResult bad = RunCommand(std::string(bin_dir) + "/textgen-server --kv-type f16 2>&1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--kv-type must be f32, bf16 or auto"));
  CommandResult help = RunCommand(std::string(bin_dir) + "/textgen-server --help");
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("--kv-type f32|bf16|auto"));
}

TEST_CASE("a port in use: the server exits naming the address and the flag that changes it",
          "[server][lifecycle]") {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  const std::string server = std::string(bin_dir) + "/textgen-server --model " +
                             ShellQuote(ModelPath("stories260K.gguf")) + " --shutdown-grace 0";
  ListeningPort taken;
  const std::string addr = "127.0.0.1:" + std::to_string(taken.port());
  CommandResult grpc = RunCommand(server + " --listen " + addr + " 2>&1");
  INFO(grpc.out);
  CHECK(grpc.exit_code != 0);
  CHECK_THAT(grpc.out, Catch::Contains("cannot listen on " + addr + " for gRPC (--listen)"));
  CommandResult http = RunCommand(server + " --listen 127.0.0.1:0 --http-listen " + addr + " 2>&1");
  INFO(http.out);
  CHECK(http.exit_code != 0);
  CHECK_THAT(http.out,
             Catch::Contains("cannot listen on " + addr + " for the HTTP API (--http-listen)"));
}

TEST_CASE("textgen-server --batch-invariant takes auto, on or off, flag or environment") {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  const std::string server = std::string(bin_dir) + "/textgen-server";
  CommandResult bad = RunCommand(server + " --batch-invariant yes 2>&1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--batch-invariant must be auto, on or off"));
  CommandResult bad_env = RunCommand("TEXTGEN_BATCH_INVARIANT=1 " + server + " 2>&1");
  CHECK(bad_env.exit_code == 2);
  CHECK_THAT(bad_env.out, Catch::Contains("TEXTGEN_BATCH_INVARIANT must be auto, on or off"));
  CommandResult help = RunCommand(server + " --help");
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("--batch-invariant auto|on|off"));

  // auto follows the kernel level this machine runs (ops::BatchInvariantByDefault: on at
  // avx512/avx512vnni/avx512bf16, off elsewhere); a flag overrides it. (Not pinned with
  // TEXTGEN_MAX_ISA: the sanitizer builds hold one kernel level only.)
  const std::string automatic = ops::BatchInvariantByDefault() ? "on" : "off";
  for (const std::string value : {"auto", "on", "off"}) {
    ServerProcessOptions o;
    o.extra_args = {"--batch-invariant", value};
    ServerProcess s(o);
    INFO(value);
    CHECK_THAT(s.Log(), Catch::Contains("batch-invariant matmuls: " +
                                        (value == "auto" ? automatic : value)));
  }
}

TEST_CASE("textgen-server --kernel-select: measure logs each choice, table measures nothing",
          "[server][lifecycle]") {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  const std::string server = std::string(bin_dir) + "/textgen-server";
  CommandResult bad = RunCommand(server + " --kernel-select fastest 2>&1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--kernel-select must be measure or table"));
  CommandResult bad_env = RunCommand("TEXTGEN_KERNEL_SELECT=fastest " + server + " 2>&1");
  CHECK(bad_env.exit_code == 2);
  CHECK_THAT(bad_env.out, Catch::Contains("TEXTGEN_KERNEL_SELECT must be measure or table"));
  CHECK_THAT(RunCommand(server + " --help").out, Catch::Contains("--kernel-select measure|table"));
  // A Q8_0 model in the fast mode: Q8_0's levels agree bit for bit, so it is measured (on a
  // machine with one level the choice is that level, still logged). No cache: measured here.
  for (const std::string value : {"measure", "table"}) {
    ServerProcessOptions o;
    o.model = ModelsDir() + "/TinyStories-656K-Q8_0.gguf";
    o.extra_args = {"--compute", "bf16", "--kernel-select", value};
    o.env = {"TEXTGEN_KERNEL_CACHE=off"};
    ServerProcess s(o);
    INFO(value << "\n" << s.Log());
    CHECK((s.Log().find("kernel choice: q8_0 1 row: ") != std::string::npos) ==
          (value == "measure"));
  }
}

TEST_CASE("textgen-server refuses an unknown TEXTGEN_BF16_DOT with the values it takes",
          "[server][lifecycle]") {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  CommandResult bad = RunCommand("TEXTGEN_BF16_DOT=bf16 " + std::string(bin_dir) +
                                 "/textgen-server --listen 127.0.0.1:0 --model " + ModelsDir() +
                                 "/stories260K.gguf 2>&1");
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.out, Catch::Contains("TEXTGEN_BF16_DOT=bf16 is not one of: auto, vdpbf16ps, f32"));
}

TEST_CASE("TEXTGEN_ variables configure the server, flags beat them, bad ones exit 2",
          "[server][lifecycle][env]") {
  {
    ServerProcessOptions o;
    o.flags_in_env = true;  // no flags at all
    o.env = {"TEXTGEN_KV_BLOCKS=37", "TEXTGEN_LOG_LEVEL=warn"};
    ServerProcess server(o);
    auto stub = NewStub(server);
    CHECK(GetInfo(*stub).kv_blocks_total() == 37);
    v1::GenerateRequest req;
    req.set_prompt("Once upon a time");
    req.set_max_new_tokens(8);
    StreamResult r = RunGenerate(*stub, req);
    CHECK(r.status.ok());
    CHECK(r.ids.size() == 8);
    CHECK(server.Stop() == 0);
  }
  {
    ServerProcessOptions o;
    o.flags_in_env = true;
    o.env = {"TEXTGEN_KV_BLOCKS=37"};
    o.extra_args = {"--kv-blocks", "41"};
    ServerProcess server(o);
    CHECK(GetInfo(*NewStub(server)).kv_blocks_total() == 41);
  }
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  CommandResult bad =
      RunCommand("TEXTGEN_KV_CACHE_MIB=lots " + std::string(bin_dir) + "/textgen-server 2>&1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("TEXTGEN_KV_CACHE_MIB must be an integer"));
  CommandResult help = RunCommand(std::string(bin_dir) + "/textgen-server --help");
  CHECK_THAT(help.out, Catch::Contains("TEXTGEN_METRICS_LISTEN"));
}

// A stories110M-shaped model: converted to BF16 at load it takes most of a second, long
// enough to watch the server while it loads.
std::string SlowLoadingModel() {
  const std::string model = ScratchDir() + "/synth-110m.gguf";
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  CommandResult synth = RunCommand(
      std::string(bin_dir) + "/textgen-synth-model --shape stories110M --type f32 " + "--vocab " +
      ModelsDir() + "/vocab/ggml-vocab-llama-spm.gguf --out " + model + " 2>&1");
  INFO(synth.out);
  REQUIRE(synth.exit_code == 0);
  return model;
}

TEST_CASE("SIGTERM while the model loads exits at once without serving",
          "[server][lifecycle][readiness]") {
  ServerProcessOptions o;
  o.model = SlowLoadingModel();
  o.wait_for_serving = false;
  o.extra_args = {"--compute", "bf16"};
  ServerProcess server(o);
  HealthReply h = CheckHealth(*server.channel(), "");
  REQUIRE(h.ok);
  REQUIRE(h.state == HealthState::kNotServing);  // still loading
  const auto start = std::chrono::steady_clock::now();
  const int code = server.Stop(std::chrono::seconds(10));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(server.Log());
  CHECK(code == 0);
  CHECK_THAT(server.Log(), Catch::Contains("received while loading: exiting without serving"));
  CHECK_THAT(server.Log(), !Catch::Contains("] loaded "));  // it did not wait for the load
  CHECK(seconds < 0.5);
}

TEST_CASE("health is NOT_SERVING and RPCs UNAVAILABLE while the model loads",
          "[server][lifecycle][readiness]") {
  const std::string model = SlowLoadingModel();

  const int metrics_port = PickFreePort();
  int http_port = PickFreePort();
  while (http_port == metrics_port) http_port = PickFreePort();
  ServerProcessOptions o;
  o.model = model;
  o.wait_for_serving = false;
  o.extra_args = {"--compute",        "bf16",
                  "--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port),
                  "--http-listen",    "127.0.0.1:" + std::to_string(http_port)};
  ServerProcess server(o);
  HealthReply h = CheckHealth(*server.channel(), "");
  REQUIRE(h.ok);
  REQUIRE(h.state == HealthState::kNotServing);
  auto stub = NewStub(server);
  {
    grpc::ClientContext ctx;
    v1::ModelInfo info;
    const grpc::Status st = stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
    CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
    v1::GenerateRequest req;
    req.set_prompt("Once");
    req.set_max_new_tokens(2);
    CHECK(RunGenerate(*stub, req).status.error_code() == grpc::StatusCode::UNAVAILABLE);
  }
  {
    // The metrics endpoint answers during the load too.
    httplib::Client client("127.0.0.1", metrics_port);
    auto res = client.Get("/metrics");
    REQUIRE(res);
    CHECK_THAT(res->body, Catch::Contains("textgen_serving 0"));
  }
  {
    // Routers' probes: alive, not ready.
    const HttpReply ready = Get(http_port, "/ready");
    CHECK(ready.status == 503);
    CHECK(ready.json.value("status", "") == "loading");
    CHECK(Get(http_port, "/health").status == 200);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    h = CheckHealth(*server.channel(), "");
    if (h.ok && h.state == HealthState::kServing) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(h.state == HealthState::kServing);
  CHECK(Get(http_port, "/ready").status == 200);
  CHECK(GetInfo(*stub).vocab_size() == 32000);
  CHECK(server.Stop() == 0);
}

}  // namespace lifecycle_test
}  // namespace textgen::testing
