// End-to-end tests of the textgen-client binary against a live textgen-server (both from
// $TEXTGEN_BIN_DIR): output formats, exit statuses, sessions and the load generator.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/support/server_process.h"
#include "tests/test_util.h"

namespace textgen {
namespace textgen_client_test {

using RunResult = testing::CommandResult;
using testing::ShellQuote;

// Runs `textgen-client ARGS` through the shell; `stdin_text`, when given, is piped in.
RunResult Client(const std::string& args, bool with_stderr = false,
                 const std::string* stdin_text = nullptr) {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  std::string cmd =
      std::string(bin_dir) + "/textgen-client " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  if (stdin_text != nullptr) cmd = "printf '%s' " + ShellQuote(*stdin_text) + " | " + cmd;
  return testing::RunCommand(cmd);
}

// A server for one test case. No test leaves a call in flight, so a short shutdown grace only
// saves the time the server would otherwise wait for idle connections to drain.
testing::ServerProcessOptions QuickStop() {
  testing::ServerProcessOptions options;
  options.extra_args = {"--shutdown-grace", "1"};
  return options;
}

std::vector<std::string> Lines(const std::string& s) {
  return absl::StrSplit(s, '\n', absl::SkipEmpty());
}

TEST_CASE("textgen-client generate streams the demo story", "[cli][server]") {
  testing::ServerProcess server(QuickStop());
  const std::string s = "generate --server " + server.address() + " ";
  RunResult r = Client(s + "--prompt 'Once upon a time' --max-new-tokens 40 --ignore-eos");
  REQUIRE(r.exit_code == 0);
  // Only the continuation is printed, not the prompt.
  CHECK_THAT(r.out, Catch::StartsWith(", there was a little girl named Lily"));
  CHECK_THAT(r.out, Catch::Contains("there was a little girl named Lily"));

  SECTION("--json prints every message as a JSON line; the last one finishes") {
    RunResult j = Client(s + "--prompt 'Once upon a time' --max-new-tokens 40 --ignore-eos --json");
    REQUIRE(j.exit_code == 0);
    std::vector<std::string> lines = Lines(j.out);
    REQUIRE(lines.size() >= 2);
    std::string text;
    for (size_t i = 0; i < lines.size(); ++i) {
      nlohmann::json m = nlohmann::json::parse(lines[i]);  // throws (fails) on a bad line
      text += m.value("text", "");
      CHECK(m.contains("finish_reason") == (i + 1 == lines.size()));
    }
    nlohmann::json last = nlohmann::json::parse(lines.back());
    CHECK(last["finish_reason"] == "LENGTH");
    CHECK(last["usage"]["generated_tokens"] == 40);
    CHECK(text + "\n" == r.out);
  }

  SECTION("--prompt-ids and the other request flags are sent") {
    RunResult j = Client(s +
                         "--prompt-ids 1,403,407,261,378 --max-new-tokens 8 --method sample "
                         "--temperature 0.8 --top-k 20 --seed 7 --top-logprobs 2 --json");
    REQUIRE(j.exit_code == 0);
    int tokens = 0;
    for (const std::string& line : Lines(j.out)) {
      for (const auto& t : nlohmann::json::parse(line).value("tokens", nlohmann::json::array())) {
        CHECK(t["top_logprobs"].size() == 2);
        ++tokens;
      }
    }
    CHECK(tokens == 8);
  }
}

TEST_CASE("textgen-client reports errors with exit statuses", "[cli][server]") {
  testing::ServerProcess server(QuickStop());
  const std::string s = "generate --server " + server.address() + " ";
  SECTION("a bad flag value is a usage error (2) that names the flag") {
    RunResult r = Client(s + "--prompt x --max-new-tokens lots", /*with_stderr=*/true);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.out, Catch::Contains("--max-new-tokens"));
    CHECK(Client(s + "--prompt x --method fastest").exit_code == 2);
    CHECK(Client(s + "--prompt x --bogus").exit_code == 2);
    CHECK(Client(s).exit_code == 2);  // no prompt
    CHECK(Client("frobnicate").exit_code == 2);
  }
  SECTION("a server rejection is exit 1 with the status code") {
    RunResult r = Client(s + "--prompt x --method beam --beams 17", /*with_stderr=*/true);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.out, Catch::Contains("error: INVALID_ARGUMENT: "));
  }
}

TEST_CASE("textgen-client tokenize, info and health", "[cli][server]") {
  testing::ServerProcess server(QuickStop());
  const std::string addr = " --server " + server.address();

  RunResult t = Client("tokenize --text 'Once upon a time' --json" + addr);
  REQUIRE(t.exit_code == 0);
  nlohmann::json tj = nlohmann::json::parse(t.out);
  REQUIRE(!tj["ids"].empty());
  CHECK(tj["ids"].size() == tj["pieces"].size());
  RunResult tt = Client("tokenize --text 'Once upon a time'" + addr);
  REQUIRE(tt.exit_code == 0);
  CHECK(Lines(tt.out).size() == tj["ids"].size());

  RunResult i = Client("info --json" + addr);
  REQUIRE(i.exit_code == 0);
  CHECK(nlohmann::json::parse(i.out)["vocab_size"] == 512);
  RunResult it = Client("info" + addr);
  REQUIRE(it.exit_code == 0);
  CHECK_THAT(it.out, Catch::Contains("vocab_size: 512\n"));

  RunResult h = Client("health" + addr);
  CHECK(h.exit_code == 0);
  CHECK(h.out == "SERVING\n");
}

TEST_CASE("textgen-client health fails without a server", "[cli]") {
  RunResult h =
      Client("health --timeout 2 --server 127.0.0.1:" + std::to_string(testing::PickFreePort()),
             /*with_stderr=*/true);
  CHECK(h.exit_code == 1);
  CHECK_THAT(h.out, Catch::Contains("error: UNAVAILABLE"));
}

TEST_CASE("textgen-client chat talks through the Chat RPC in a session", "[cli][server]") {
  testing::ServerProcessOptions options = QuickStop();
  options.extra_args.insert(options.extra_args.end(),
                            {"--chat-template", testing::ChatTemplatesDir() +
                                                    "/templates/Qwen-Qwen2.5-7B-Instruct.jinja"});
  testing::ServerProcess server(options);
  const std::string turns = "Tell me a story.\nWho is in it?\n/reset\nTell me a story.\n";
  // stdout is flushed after each answer's newline, before the usage line goes to stderr, so
  // the merged output alternates answer and usage lines.
  RunResult r = Client(
      "chat --system 'You tell stories.' --usage --max-new-tokens 12 --server " + server.address(),
      /*with_stderr=*/true, &turns);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> answers, usage;
  const std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    (line.rfind("[", 0) == 0 ? usage : answers).push_back(line);
  }
  REQUIRE(answers.size() == 3);
  CHECK(answers[0] == answers[2]);  // the same first turn in a fresh session
  REQUIRE(usage.size() == 3);
  CHECK_THAT(usage[0], Catch::Contains("(0 cached)"));
  CHECK_THAT(usage[1], !Catch::Contains("(0 cached)"));  // the second turn reused the first
  // A fresh session starts from the prefix cache: the first turn's full blocks are still there.
  CHECK_THAT(usage[2], !Catch::Contains("(0 cached)"));

  // Without a template the server refuses Chat and says what to do.
  testing::ServerProcess plain(QuickStop());
  const std::string one = "Hello\n";
  RunResult refused = Client("chat --server " + plain.address(), /*with_stderr=*/true, &one);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.out,
             Catch::Contains("FAILED_PRECONDITION") && Catch::Contains("--chat-template"));
}

TEST_CASE("textgen-client chat --raw keeps a session across turns", "[cli][server]") {
  testing::ServerProcess server(QuickStop());
  const std::string turns =
      "Once upon a time\nThe end.\n/reset\nOnce upon a time\n/quit\nignored\n";
  RunResult r = Client("chat --raw --max-new-tokens 12 --server " + server.address(),
                       /*with_stderr=*/false, &turns);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n');
  REQUIRE(lines.size() == 4);  // three answers, each ended by a newline
  CHECK(lines[3].empty());
  // After /reset the same first turn in a fresh session gives the same greedy answer.
  CHECK(lines[0] == lines[2]);
  CHECK_THAT(lines[0], Catch::Contains("there was a little girl"));
}

TEST_CASE("textgen-client session creates and deletes sessions for generate", "[cli][server]") {
  testing::ServerProcess server(QuickStop());
  const std::string at = " --server " + server.address();
  RunResult created = Client("session --create" + at);
  REQUIRE(created.exit_code == 0);
  const std::string id = std::string(absl::StripAsciiWhitespace(created.out));
  CHECK(id.size() == 32);
  // The client picked it, so the create already carried x-session-id (for a balancer).
  // (The log shows only the id's start: a full id would let a log reader take the session over.)
  CHECK_THAT(server.Log(),
             Catch::Contains("create_session id=" + id.substr(0, 8) + "... chosen_by=client"));
  CHECK_THAT(server.Log(), !Catch::Contains(id));
  const std::string mine = "00112233445566778899aabbccddeeff";
  RunResult chosen = Client("session --create --id " + mine + at);
  REQUIRE(chosen.exit_code == 0);
  CHECK(absl::StripAsciiWhitespace(chosen.out) == mine);
  CHECK(Client("session --create --id " + mine + at, true).exit_code == 1);  // taken
  for (const char* turn : {"'Once upon a time'", "' Then she'"}) {
    RunResult g = Client("generate --session " + id + " --prompt " + turn +
                         " --max-new-tokens 8 --json" + at);
    REQUIRE(g.exit_code == 0);
  }
  RunResult second =
      Client("generate --session " + id + " --prompt ' And' --max-new-tokens 4 --json" + at);
  REQUIRE(second.exit_code == 0);
  CHECK_THAT(second.out, Catch::Contains("cached"));
  REQUIRE(Client("session --delete " + id + at).exit_code == 0);
  RunResult gone = Client("generate --session " + id + " --prompt x" + at, true);
  CHECK(gone.exit_code == 1);
  CHECK_THAT(gone.out, Catch::Contains("NOT_FOUND"));
  CHECK(Client("session" + at, true).exit_code == 2);
}

TEST_CASE("textgen-client load opens every connection first and says so when it cannot", "[cli]") {
  // Nothing listens on port 1: the connection is refused, gRPC retries until --timeout.
  RunResult r =
      Client("load --server 127.0.0.1:1 --prompt x --concurrency 2 --requests 2 --timeout 1", true);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out,
             Catch::Contains("error: UNAVAILABLE: cannot connect to 127.0.0.1:1 within 1 s"));
  CHECK_THAT(r.out, !Catch::Contains("requests/s"));  // no run was timed
}

TEST_CASE("textgen-client load reports throughput and latency", "[cli][server]") {
  testing::ServerProcess server(QuickStop());
  const std::string s = "load --server " + server.address() + " --prompt 'Once upon a time' ";
  RunResult r = Client(s + "--concurrency 4 --requests 8 --max-new-tokens 16", true);
  INFO(r.out);  // the error counts and first messages, should a request fail
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("8 requests ok, 0 errors"));
  CHECK_THAT(r.out, Catch::Contains("requests/s:"));
  CHECK_THAT(r.out, Catch::Contains("generated tokens/s:"));
  CHECK_THAT(r.out, Catch::Contains("time to first token (ms):"));
  CHECK_THAT(r.out, Catch::Contains("inter-token latency (ms):"));
  CHECK_THAT(r.out, Catch::Contains("errors: 0\n"));

  SECTION("--session-turns reports the last turn separately; --json") {
    RunResult j = Client(s +
                         "--concurrency 2 --requests 6 --session-turns 3 --max-new-tokens 8 "
                         "--ignore-eos --json");
    REQUIRE(j.exit_code == 0);
    nlohmann::json o = nlohmann::json::parse(j.out);
    CHECK(o["requests_ok"] == 6);
    CHECK(o["errors_total"] == 0);
    CHECK(o["generated_tokens"] == 48);
    CHECK(o["time_to_first_token_ms"]["samples"] == 6);
    CHECK(o["inter_token_latency_ms"]["samples"].get<int>() > 0);
    CHECK(o["last_turn_time_to_first_token_ms"]["samples"] == 2);
    CHECK(o["first_turn_time_to_first_token_ms"]["samples"] == 2);
  }

  SECTION("--prompt-tokens sends random prompts of exactly that many tokens") {
    const std::string base = "load --server " + server.address() + " ";
    RunResult j = Client(base +
                         "--prompt-tokens 40 --concurrency 2 --requests 4 --max-new-tokens 8 "
                         "--ignore-eos --json");
    REQUIRE(j.exit_code == 0);
    nlohmann::json o = nlohmann::json::parse(j.out);
    CHECK(o["requests_ok"] == 4);
    CHECK(o["prompt_tokens"] == 160);  // usage.prompt_tokens as the server counted them
    CHECK(o["generated_tokens"] == 32);
    RunResult both = Client(base + "--prompt-tokens 40 --prompt x --requests 1", true);
    CHECK(both.exit_code == 2);
    CHECK_THAT(both.out, Catch::Contains("only one of --prompt, --prompt-ids and --prompt-tokens"));
  }

  SECTION("failures are counted by status code") {
    RunResult e = Client(s + "--concurrency 2 --requests 4 --method beam --beams 17");
    CHECK(e.exit_code == 1);
    CHECK_THAT(e.out, Catch::Contains("errors: 4\n"));
    CHECK_THAT(e.out, Catch::Contains("INVALID_ARGUMENT: 4"));
  }
}

}  // namespace textgen_client_test
}  // namespace textgen
