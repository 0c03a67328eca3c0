// Automatic prefix caching through the real server: a prompt sent again (over gRPC or the HTTP
// API) is served from cached blocks, reported in usage.cached_tokens and the HTTP API's
// usage.prompt_tokens_details.cached_tokens, and counted in /metrics; --prefix-cache off.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/server/openai_test_util.h"
#include "tests/server/server_test_util.h"
#include "tests/support/metrics_scrape.h"

namespace textgen::testing {
namespace prefix_cache_test {

// A few hundred tokens of stories260K's vocabulary: many whole 16-token blocks.
std::string LongPrompt() {
  std::string p;
  for (int i = 0; i < 6; ++i) {
    p += "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
         "park with her dog Max. ";
  }
  return p;
}

StreamResult Generate(v1::TextGeneration::Stub& stub, const std::string& prompt) {
  v1::GenerateRequest req;
  req.set_prompt(prompt);
  req.set_max_new_tokens(12);
  req.set_ignore_eos(true);
  StreamResult r = RunGenerate(stub, req);
  INFO(r.status.error_message());
  REQUIRE(r.status.ok());
  return r;
}

Json Completion(int port, const std::string& prompt) {
  const Json body = {
      {"model", "stories260K.gguf"}, {"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}};
  HttpReply r = Post(port, "/v1/completions", body);
  INFO(r.body);
  REQUIRE(r.status == 200);
  return r.json;
}

TEST_CASE("a repeated prompt is served from the prefix cache over gRPC and HTTP, and counted",
          "[server][prefix]") {
  auto server = StartHttpServer({"--compute", "f32"});
  auto stub = NewStub(*server->process);
  const std::string prompt = LongPrompt();
  const StreamResult first = Generate(*stub, prompt);
  const int prompt_tokens = static_cast<int>(first.last.usage().prompt_tokens());
  // All but the last token (which must run): whole blocks, then the rows of the block that
  // holds the prompt's end and the first reply's start, copied.
  const int reusable = prompt_tokens - 1;
  REQUIRE(reusable >= 64);
  CHECK(first.last.usage().cached_tokens() == 0);

  const StreamResult second = Generate(*stub, prompt);
  CHECK(static_cast<int>(second.last.usage().cached_tokens()) == reusable);
  CHECK(second.ids == first.ids);

  const Json http = Completion(server->http_port, prompt);
  CHECK(http.at("usage").at("prompt_tokens") == prompt_tokens);
  CHECK(http.at("usage").at("prompt_tokens_details").at("cached_tokens") == reusable);
  CHECK(http.at("choices").at(0).at("text") == first.text);

  // Another prompt: only the BOS token it shares (its row copied).
  const StreamResult other = Generate(*stub, "The cat sat on the mat and looked at the bird.");
  CHECK(other.last.usage().cached_tokens() == 1);

  const Exposition e = WaitForMetrics(server->metrics_port, 10, [&](const Exposition& m) {
    return m.Get("textgen_prefix_cache_lookups_total") == 4;
  });
  CHECK(e.types.at("textgen_prefix_cache_lookups_total") == "counter");
  CHECK(e.types.at("textgen_prefix_cache_hit_tokens_total") == "counter");
  CHECK(e.types.at("textgen_prefix_cache_evictions_total") == "counter");
  CHECK(e.types.at("textgen_kv_blocks_cached") == "gauge");
  CHECK(e.Get("textgen_prefix_cache_lookups_total") == 4);
  CHECK(e.Get("textgen_prefix_cache_lookup_tokens_total") ==
        3 * prompt_tokens + static_cast<int>(other.last.usage().prompt_tokens()));
  CHECK(e.Get("textgen_prefix_cache_hit_tokens_total") == 2 * reusable + 1);
  CHECK(e.Get("textgen_prefix_cache_evictions_total") == 0);
  CHECK(e.Get("textgen_cached_prompt_tokens_total") == 2 * reusable + 1);
  CHECK(e.Get("textgen_kv_blocks_cached") >= reusable / 16);
  // The pool's pages in memory: at least the cached blocks' (these are whole pages or more).
  CHECK(e.types.at("textgen_kv_pool_resident_bytes") == "gauge");
  CHECK(e.Get("textgen_kv_pool_resident_bytes") > 0);
  // Cached blocks are reclaimable: all count as free once the requests are done.
  CHECK(e.Get("textgen_kv_blocks", {{"state", "used"}}) == 0);
}

// (A Catch2 test name must not start with "--": it would be read as an option.)
TEST_CASE("prefix cache off: a repeated prompt is computed again", "[server][prefix]") {
  auto server = StartHttpServer({"--prefix-cache", "off"});
  auto stub = NewStub(*server->process);
  const std::string prompt = LongPrompt();
  Generate(*stub, prompt);
  CHECK(Generate(*stub, prompt).last.usage().cached_tokens() == 0);
  const Json http = Completion(server->http_port, prompt);
  CHECK(http.at("usage").at("prompt_tokens_details").at("cached_tokens") == 0);
  const Exposition e = ScrapeMetrics(server->metrics_port);
  CHECK(e.Get("textgen_prefix_cache_lookups_total") == 0);
  CHECK(e.Get("textgen_kv_blocks_cached") == 0);

  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  CommandResult bad = RunCommand(std::string(bin_dir) + "/textgen-server --prefix-cache no 2>&1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--prefix-cache must be on or off, got \"no\""));
  CommandResult help = RunCommand(std::string(bin_dir) + "/textgen-server --help");
  CHECK_THAT(help.out, Catch::Contains("--prefix-cache on|off"));
}

TEST_CASE("the KV pool is committed at start with the prefix cache, lazily without it",
          "[server][prefix]") {
  // A 64 MiB pool: committed whole it is all resident before any request; lazily, the warm-up
  // pass touches one block (huge pages may fault 2 MiB at once).
  constexpr double kPool = 64 << 20;
  auto resident = [&](std::vector<std::string> flags) {
    flags.insert(flags.end(), {"--kv-cache-mib", "64"});
    auto server = StartHttpServer(flags);
    return ScrapeMetrics(server->metrics_port).Get("textgen_kv_pool_resident_bytes");
  };
  CHECK(resident({}) >= 0.99 * kPool);
  CHECK(resident({"--prefix-cache", "off"}) < 0.25 * kPool);
  CHECK(resident({"--kv-prefault", "off"}) < 0.25 * kPool);
  CHECK(resident({"--prefix-cache", "off", "--kv-prefault", "on"}) >= 0.99 * kPool);

  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  CommandResult bad = RunCommand(std::string(bin_dir) + "/textgen-server --kv-prefault yes 2>&1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--kv-prefault must be auto, on or off, got \"yes\""));
}

}  // namespace prefix_cache_test
}  // namespace textgen::testing
