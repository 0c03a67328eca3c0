// What routers and probes in front of a fleet read: /health and /ready on the HTTP listener
// (open even with API keys: probes carry none) and vLLM's metric names beside ours.
#include <catch2/catch.hpp>
#include <string>

#include "tests/server/openai_test_util.h"
#include "tests/server/server_test_util.h"
#include "tests/server/tls_test_util.h"
#include "tests/support/metrics_scrape.h"

namespace textgen::testing {
namespace probe_routes_test {

TEST_CASE("health and ready answer without an API key, the API does not",
          "[server][probes][auth]") {
  TestCerts certs = MakeTestCerts();
  auto server = StartHttpServer({"--api-keys-file", certs.keys_file});
  const int port = server->http_port;
  const HttpReply health = Get(port, "/health");
  CHECK(health.status == 200);
  CHECK(health.json["status"] == "ok");
  const HttpReply ready = Get(port, "/ready");
  CHECK(ready.status == 200);
  CHECK(ready.json["status"] == "ready");
  CHECK(ready.json["state_store"] == "off");  // no --state-dir
  CHECK(Get(port, "/v1/models").status == 401);
}

TEST_CASE("vLLM's router metrics follow the engine", "[server][probes][metrics]") {
  auto server = StartHttpServer({"--kv-cache-mib", "16", "--kv-block-size", "32"});
  const HttpReply models = Get(server->http_port, "/v1/models");
  REQUIRE(models.status == 200);
  const std::string model = models.json["data"][0]["id"];
  const Exposition idle = ScrapeMetrics(server->metrics_port);
  CHECK(idle.types.at("vllm:num_requests_waiting") == "gauge");
  CHECK(idle.Get("vllm:num_requests_waiting", {{"model_name", model}}) == 0);
  CHECK(idle.Get("vllm:num_requests_running", {{"model_name", model}}) == 0);
  const double usage = idle.Get("vllm:kv_cache_usage_perc", {{"model_name", model}});
  CHECK(usage >= 0);
  CHECK(usage < 0.01);
  const std::vector<Sample> config = idle.All("vllm:cache_config_info");
  REQUIRE(config.size() == 1);
  CHECK(config[0].value == 1);
  CHECK(config[0].labels.at("block_size") == "32");
  CHECK(config[0].labels.at("enable_prefix_caching") == "True");
  // Test servers compute in f32 (tests/support/server_process.cc); the KV cache follows.
  CHECK(config[0].labels.at("cache_dtype") == "f32");
  // The pool's blocks: the same count our own gauges give.
  const double blocks = idle.Get("textgen_kv_blocks", {{"state", "used"}}) +
                        idle.Get("textgen_kv_blocks", {{"state", "free"}});
  CHECK(std::stod(config[0].labels.at("num_gpu_blocks")) == blocks);
}

}  // namespace probe_routes_test
}  // namespace textgen::testing
