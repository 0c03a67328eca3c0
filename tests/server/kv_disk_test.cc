// The KV disk tier through the real server (--state-dir, --kv-disk-gib): a long prompt's cached
// blocks are written at shutdown, and after a restart on the same directory the same prompt is
// served from them (counted in /metrics), with the same tokens.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/server/openai_test_util.h"
#include "tests/server/server_test_util.h"
#include "tests/support/metrics_scrape.h"
#include "tests/test_util.h"

namespace textgen::testing {
namespace kv_disk_server_test {

namespace fs = std::filesystem;

std::string LongPrompt() {
  std::string p;
  for (int i = 0; i < 8; ++i) {
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

TEST_CASE("a restart on the same state directory serves a long prompt from the KV disk tier",
          "[server][kv_disk]") {
  const std::string dir = ScratchDir() + "/kv_disk_server_test";
  fs::remove_all(dir);
  const std::vector<std::string> flags = {"--compute", "f32",           "--state-dir",
                                          dir,         "--kv-disk-gib", "0.5"};
  const std::string prompt = LongPrompt();
  StreamResult first;
  {
    auto server = StartHttpServer(flags);
    auto stub = NewStub(*server->process);
    first = Generate(*stub, prompt);
    CHECK(first.last.usage().cached_tokens() == 0);
    const Exposition e = ScrapeMetrics(server->metrics_port);
    CHECK(e.types.at("textgen_kv_disk_blocks_written_total") == "counter");
    CHECK(e.types.at("textgen_kv_disk_bytes") == "gauge");
    CHECK(e.Get("textgen_kv_disk_blocks_read_total") == 0);
    CHECK(server->process->Stop() == 0);
  }
  const int prompt_tokens = static_cast<int>(first.last.usage().prompt_tokens());
  const int whole_blocks = (prompt_tokens - 1) / 16;
  REQUIRE(whole_blocks >= 8);
  int files = 0;
  for (const auto& f : fs::directory_iterator(dir + "/kv")) files += f.path().extension() == ".kvb";
  CHECK(files >= whole_blocks);

  auto server = StartHttpServer(flags);
  auto stub = NewStub(*server->process);
  const StreamResult second = Generate(*stub, prompt);
  CHECK(second.ids == first.ids);
  CHECK(second.text == first.text);
  CHECK(static_cast<int>(second.last.usage().cached_tokens()) == whole_blocks * 16);
  const Exposition e = ScrapeMetrics(server->metrics_port);
  CHECK(e.Get("textgen_kv_disk_blocks_read_total") == whole_blocks);
  CHECK(e.Get("textgen_kv_disk_blocks_rejected_total") == 0);
  CHECK(e.Get("textgen_kv_disk_files") >= whole_blocks);
  CHECK(e.Get("textgen_kv_disk_bytes") > 0);
}

TEST_CASE("the KV disk tier's flags: help, bad values", "[server][kv_disk]") {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  CommandResult help = RunCommand(std::string(bin_dir) + "/textgen-server --help");
  CHECK_THAT(help.out, Catch::Contains("--kv-disk-gib N"));
  CHECK_THAT(help.out, Catch::Contains("--state-dir DIR"));
  CommandResult bad = RunCommand(std::string(bin_dir) + "/textgen-server --kv-disk-gib -1 2>&1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--kv-disk-gib"));
}

}  // namespace kv_disk_server_test
}  // namespace textgen::testing
