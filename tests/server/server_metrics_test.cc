// textgen-server's /metrics after real traffic: scraped over HTTP, parsed as the Prometheus
// text format, and checked against what the clients saw.
#include "server/server_metrics.h"

#include <httplib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "tests/server/server_test_util.h"
#include "tests/support/metrics_scrape.h"

namespace textgen::testing {
namespace server_metrics_test {

// Buckets cumulative, +Inf equal to _count; returns _count.
double CheckHistogram(const Exposition& e, const std::string& name) {
  INFO("histogram " << name);
  std::vector<Sample> buckets = e.All(name + "_bucket");
  REQUIRE(buckets.size() >= 2);
  double prev = 0, prev_le = -INFINITY;
  for (const Sample& b : buckets) {
    const double le = b.labels.at("le") == "+Inf" ? INFINITY : std::stod(b.labels.at("le"));
    CHECK(le > prev_le);
    CHECK(b.value >= prev);
    prev = b.value;
    prev_le = le;
  }
  CHECK(buckets.back().labels.at("le") == "+Inf");
  CHECK(buckets.back().value == e.Get(name + "_count"));
  CHECK(e.Get(name + "_sum") >= 0);
  return e.Get(name + "_count");
}

double Requests(const Exposition& e, const std::string& method, const std::string& code) {
  return e.Get("textgen_requests_total", {{"method", method}, {"code", code}});
}

TEST_CASE("/metrics after real traffic counts requests, tokens and latencies",
          "[server][metrics]") {
  const int metrics_port = PickFreePort();
  ServerProcessOptions o;
  o.extra_args = {"--max-max-new-tokens", std::to_string(kEndless),
                  "--kv-cache-mib",       "8",
                  "--metrics-listen",     "127.0.0.1:" + std::to_string(metrics_port)};
  ServerProcess server(o);
  auto stub = NewStub(server);
  const v1::ModelInfo info = GetInfo(*stub);

  // Phase 1: three streams that run to their end.
  int ok_tokens = 0, prompt_tokens = 0;
  for (int n : {5, 12, 20}) {
    v1::GenerateRequest req;
    req.set_prompt("Once upon a time");
    req.set_max_new_tokens(n);
    req.set_ignore_eos(true);
    StreamResult r = RunGenerate(*stub, req);
    INFO(r.status.error_message());
    REQUIRE(r.status.ok());
    REQUIRE(static_cast<int>(r.ids.size()) == n);
    CHECK(static_cast<int>(r.last.usage().generated_tokens()) == n);
    ok_tokens += n;
    prompt_tokens = static_cast<int>(r.last.usage().prompt_tokens());
  }
  Exposition e = ScrapeMetrics(metrics_port);
  CHECK(e.types.at("textgen_requests_total") == "counter");
  CHECK(e.types.at("textgen_kv_blocks") == "gauge");
  CHECK(e.types.at("textgen_time_to_first_token_seconds") == "histogram");
  CHECK(Requests(e, "Generate", "OK") == 3);
  CHECK(Requests(e, "GetModelInfo", "OK") == 1);
  CHECK(e.Get("textgen_generated_tokens_total") == ok_tokens);
  CHECK(e.Get("textgen_prompt_tokens_total") == 3 * prompt_tokens);
  // The second and third share the first's K/V (prefix cache): all but their last token.
  CHECK(e.Get("textgen_cached_prompt_tokens_total") == 2 * (prompt_tokens - 1));
  CHECK(CheckHistogram(e, "textgen_time_to_first_token_seconds") == 3);
  // Greedy streams one token per step: every token after a stream's first is one gap.
  CHECK(CheckHistogram(e, "textgen_inter_token_latency_seconds") == ok_tokens - 3);

  // Phase 2: a cancel, a deadline, an invalid request, the unary RPCs and a session.
  int cut_tokens = 0, cut_with_tokens = 0;
  {
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, EndlessRequest());
    v1::GenerateResponse msg;
    REQUIRE(reader->Read(&msg));
    ctx.TryCancel();
    while (reader->Read(&msg)) {
    }
    CHECK(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
    ++cut_with_tokens;
    cut_tokens += msg.tokens_size();
  }
  {
    StreamResult r = RunGenerate(*stub, EndlessRequest(), /*deadline_ms=*/400);
    CHECK(r.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
    cut_tokens += static_cast<int>(r.ids.size());
    if (!r.ids.empty()) ++cut_with_tokens;
  }
  {
    v1::GenerateRequest bad;  // neither prompt nor prompt_ids
    bad.set_max_new_tokens(4);
    CHECK(RunGenerate(*stub, bad).status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    v1::TokenizeRequest req;
    req.set_text("Once upon a time");
    v1::TokenizeResponse resp;
    CHECK(stub->Tokenize(&ctx, req, &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    v1::Session session;
    CHECK(stub->CreateSession(&ctx, v1::CreateSessionRequest(), &session).ok());
  }
  {
    grpc::ClientContext ctx;
    v1::DeleteSessionRequest req;
    req.set_session_id(std::string(32, 'a'));
    v1::DeleteSessionResponse resp;
    CHECK(stub->DeleteSession(&ctx, req, &resp).error_code() == grpc::StatusCode::NOT_FOUND);
  }

  // The engine ends the cut requests at its next step; their prompt tokens count then.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    e = ScrapeMetrics(metrics_port);
    if (e.Get("textgen_prompt_tokens_total") == 5 * prompt_tokens &&
        e.Get("textgen_active_requests") == 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  CHECK(e.Get("textgen_prompt_tokens_total") == 5 * prompt_tokens);
  CHECK(e.Get("textgen_active_sequences") == 0);
  CHECK(Requests(e, "Generate", "OK") == 3);
  CHECK(Requests(e, "Generate", "CANCELLED") == 1);
  CHECK(Requests(e, "Generate", "DEADLINE_EXCEEDED") == 1);
  CHECK(Requests(e, "Generate", "INVALID_ARGUMENT") == 1);
  CHECK(Requests(e, "Tokenize", "OK") == 1);
  CHECK(Requests(e, "CreateSession", "OK") == 1);
  CHECK(Requests(e, "DeleteSession", "NOT_FOUND") == 1);
  CHECK(Requests(e, "GetModelInfo", "OK") == 1);
  double total = 0;
  for (const Sample& s : e.All("textgen_requests_total")) total += s.value;
  CHECK(total == 10);
  // The cut streams generated at least what their clients received (maybe a step more).
  CHECK(e.Get("textgen_generated_tokens_total") >= ok_tokens + cut_tokens);
  CHECK(CheckHistogram(e, "textgen_time_to_first_token_seconds") == 3 + cut_with_tokens);
  CheckHistogram(e, "textgen_inter_token_latency_seconds");
  CHECK(e.Get("textgen_queue_depth") == 0);
  CHECK(e.Get("textgen_sessions") == 1);
  CHECK(e.Get("textgen_serving") == 1);
  CHECK(e.Get("textgen_model_info", {{"model", "stories260K.gguf"}, {"name", info.name()}}) == 1);
  const double used = e.Get("textgen_kv_blocks", {{"state", "used"}});
  const double free = e.Get("textgen_kv_blocks", {{"state", "free"}});
  CHECK(used + free == info.kv_blocks_total());
  CHECK(used == 0);  // nothing runs and the session holds no tokens yet
  CHECK(server.Stop() == 0);
}

TEST_CASE("a metrics address already taken fails the start", "[server][metrics]") {
  const int port = PickFreePort();
  httplib::Server blocker;
  blocker.set_socket_options([](socket_t) {});  // no SO_REUSEPORT: the port is really taken
  REQUIRE(blocker.bind_to_port("127.0.0.1", port));
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  CommandResult r = RunCommand(
      std::string(bin_dir) + "/textgen-server --model " + ModelPath("stories260K.gguf") +
      " --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:" + std::to_string(port) + " 2>&1");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("for metrics"));
}

}  // namespace server_metrics_test
}  // namespace textgen::testing
