// The README's first command, scripts/demo.sh, end to end with --once: it starts textgen-server
// with gRPC, the OpenAI-compatible API and the chat page, streams a story over gRPC, gets an
// answer from /v1/chat/completions and the page, prints the addresses, then stops the server.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "tests/support/server_process.h"
#include "tests/test_util.h"

namespace textgen {
namespace demo_test {

using testing::CommandResult;

CommandResult Demo(const std::string& args) {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  return testing::RunCommand("bash " +
                             testing::ShellQuote(testing::SourceDir() + "/scripts/demo.sh") +
                             " --bin-dir " + testing::ShellQuote(bin_dir) + " " + args + " 2>&1");
}

TEST_CASE("scripts/demo.sh --once serves, streams a story and answers over HTTP", "[cli][demo]") {
  const int grpc_port = testing::PickFreePort();
  int http_port = testing::PickFreePort();
  while (http_port == grpc_port) http_port = testing::PickFreePort();
  const std::string grpc = "127.0.0.1:" + std::to_string(grpc_port);
  const std::string http = "http://127.0.0.1:" + std::to_string(http_port);
  CommandResult r = Demo("--once --grpc-port " + std::to_string(grpc_port) + " --http-port " +
                         std::to_string(http_port));
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  // The story streamed through textgen-client (the continuation of "Once upon a time").
  CHECK_THAT(r.out, Catch::Contains(", there was a little girl named Lily"));
  // /v1/chat/completions answered with a chat completion (the demo checks the page's 200).
  CHECK_THAT(r.out, Catch::Contains("\"object\":\"chat.completion\""));
  // The three addresses and the one-line examples.
  CHECK_THAT(r.out, Catch::Contains("gRPC                  " + grpc));
  CHECK_THAT(r.out, Catch::Contains("OpenAI-compatible API " + http + "/v1"));
  CHECK_THAT(r.out, Catch::Contains("chat page             " + http + "/"));
  CHECK_THAT(r.out, Catch::Contains("curl " + http + "/v1/chat/completions"));
  CHECK_THAT(r.out, Catch::Contains("from openai import OpenAI"));
  CHECK_THAT(r.out, Catch::Contains("node -e"));
  CHECK_THAT(r.out, Catch::Contains("demo.sh --once: done"));
}

TEST_CASE("scripts/demo.sh names a port in use and the flag that changes it", "[cli][demo]") {
  testing::ListeningPort taken;
  const std::string port = std::to_string(taken.port());
  CommandResult grpc = Demo("--once --grpc-port " + port + " --http-port " +
                            std::to_string(testing::PickFreePort()));
  INFO(grpc.out);
  CHECK(grpc.exit_code == 1);
  CHECK_THAT(grpc.out, Catch::Contains("port " + port + " (for gRPC) is already in use"));
  CHECK_THAT(grpc.out, Catch::Contains("--grpc-port"));
  CommandResult http = Demo("--once --http-port " + port + " --grpc-port " +
                            std::to_string(testing::PickFreePort()));
  INFO(http.out);
  CHECK(http.exit_code == 1);
  CHECK_THAT(http.out, Catch::Contains("port " + port + " (for HTTP) is already in use"));
  CHECK_THAT(http.out, Catch::Contains("--http-port"));
  CHECK(Demo("--grpc-port x").exit_code == 2);
  CHECK(Demo("--bogus").exit_code == 2);
}

}  // namespace demo_test
}  // namespace textgen
