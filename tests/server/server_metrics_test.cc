// textgen-server's /metrics after real traffic: scraped over HTTP, parsed as the Prometheus
// text format, and checked against what the clients saw.
#include "server/server_metrics.h"

#include <httplib.h>

#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// A strict little parser of the text format 0.0.4: FAILs on a line it does not understand, a
// sample before its family's TYPE, or a family described twice.
struct Exposition {
  std::map<std::string, std::string> types;  // family -> counter|gauge|histogram
  std::vector<Sample> samples;

  // The one sample with this name and exactly these labels; FAILs if absent.
  double Get(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    for (const Sample& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    FAIL("no sample " << name << " with the given labels");
    return 0;
  }
  std::vector<Sample> All(const std::string& name) const {
    std::vector<Sample> out;
    for (const Sample& s : samples) {
      if (s.name == name) out.push_back(s);
    }
    return out;
  }
};

// The family a sample belongs to: histograms add _bucket, _sum and _count.
std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.ends_with(s)) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

Exposition Parse(const std::string& text) {
  Exposition e;
  std::map<std::string, int> helps;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    INFO("line: " << line);
    if (line.starts_with("# HELP ")) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      REQUIRE(++helps[name] == 1);
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      std::istringstream ls(line.substr(7));
      std::string name, type;
      ls >> name >> type;
      REQUIRE(helps.count(name) == 1);  // HELP first, as the registry writes them
      REQUIRE((type == "counter" || type == "gauge" || type == "histogram"));
      REQUIRE(e.types.emplace(name, type).second);
      continue;
    }
    REQUIRE(!line.empty());
    REQUIRE(line[0] != '#');
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (line[i] == '{') {
      ++i;
      while (line[i] != '}') {
        const size_t eq = line.find('=', i);
        REQUIRE(eq != std::string::npos);
        const std::string key = line.substr(i, eq - i);
        REQUIRE(line[eq + 1] == '"');
        std::string value;
        size_t j = eq + 2;
        for (; line[j] != '"'; ++j) {
          REQUIRE(j + 1 < line.size());
          if (line[j] == '\\') {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        s.labels[key] = value;
        i = j + 1;
        if (line[i] == ',') ++i;
      }
      ++i;
    }
    REQUIRE(line[i] == ' ');
    const std::string v = line.substr(i + 1);
    s.value = v == "+Inf" ? INFINITY : std::stod(v);
    // A TYPE line precedes every sample of its family.
    REQUIRE(e.types.count(FamilyOf(s.name, e.types)) == 1);
    e.samples.push_back(std::move(s));
  }
  return e;
}

Exposition Scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  auto res = client.Get("/metrics");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  CHECK_THAT(res->get_header_value("Content-Type"), Catch::StartsWith("text/plain; version=0.0.4"));
  return Parse(res->body);
}

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
  Exposition e = Scrape(metrics_port);
  CHECK(e.types.at("textgen_requests_total") == "counter");
  CHECK(e.types.at("textgen_kv_blocks") == "gauge");
  CHECK(e.types.at("textgen_time_to_first_token_seconds") == "histogram");
  CHECK(Requests(e, "Generate", "OK") == 3);
  CHECK(Requests(e, "GetModelInfo", "OK") == 1);
  CHECK(e.Get("textgen_generated_tokens_total") == ok_tokens);
  CHECK(e.Get("textgen_prompt_tokens_total") == 3 * prompt_tokens);
  CHECK(e.Get("textgen_cached_prompt_tokens_total") == 0);
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
    e = Scrape(metrics_port);
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

}  // namespace
}  // namespace textgen::testing
