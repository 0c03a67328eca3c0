// `textgen-run --render`: prints exactly the rendered text (exit 0) or the template's error
// (exit 2), checked against ../shared/chat-templates' jinja2 renderings.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace textgen {
namespace textgen_run_render_test {

using nlohmann::ordered_json;
using testing::ShellQuote;

testing::CommandResult Render(const std::string& args, const std::string& redirect = " 2>&1") {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  return testing::RunCommand(std::string(bin_dir) + "/textgen-run --render " + args + redirect);
}

TEST_CASE("textgen-run --render prints what jinja2 renders, or exits 2 with the error", "[cli]") {
  const std::string dir = testing::ChatTemplatesDir();
  const ordered_json manifest =
      ordered_json::parse(testing::ReadFile(dir + "/expected/manifest.json"));
  int rendered = 0, raised = 0;
  // Every 37th case: a spread over templates, conversations and both outcomes. Templates that
  // print today's date are skipped (the binary reads the real clock).
  for (size_t i = 0; i < manifest["cases"].size(); i += 37) {
    const ordered_json& c = manifest["cases"][i];
    const std::string tpath = dir + "/" + c["template"].get<std::string>();
    if (testing::ReadFile(tpath).find("strftime_now") != std::string::npos) continue;
    std::string args = "--chat-template " + ShellQuote(tpath) + " --messages " +
                       ShellQuote(dir + "/" + c["conversation"].get<std::string>());
    if (c["add_generation_prompt"].get<bool>()) args += " --add-generation-prompt";
    if (!c["bos_token"].is_null()) args += " --bos-token " + ShellQuote(c["bos_token"]);
    if (!c["eos_token"].is_null()) args += " --eos-token " + ShellQuote(c["eos_token"]);
    INFO(args);
    if (c["expected"].is_null()) {
      const testing::CommandResult r = Render(args);
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.out, Catch::StartsWith("textgen-run: chat template raised"));
      ++raised;
    } else {
      const testing::CommandResult r = Render(args, " 2>/dev/null");
      CHECK(r.exit_code == 0);
      CHECK(r.out == testing::ReadFile(dir + "/" + c["expected"].get<std::string>()));
      ++rendered;
    }
  }
  CHECK(rendered > 30);
  CHECK(raised > 3);
}

TEST_CASE("textgen-run --render --model takes the model's template and tokens", "[cli]") {
  const std::string dir = testing::ChatTemplatesDir();
  const std::string conv = dir + "/conversations/11-system-multi-turn.json";
  const testing::CommandResult r =
      Render("--model " + ShellQuote(testing::ModelPath("vocab/ggml-vocab-llama3.1.gguf")) +
                 " --messages " + ShellQuote(conv) + " --add-generation-prompt",
             " 2>/dev/null");
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        testing::ReadFile(dir + "/expected/Llama-3.1-lenml/11-system-multi-turn.agp-true.txt"));
  // --chat-template with --model overrides the model's template; --bos-token the model's BOS.
  const std::string scratch = testing::ScratchDir();
  testing::WriteFile(scratch + "/t.jinja", "{{ bos_token }}|{{ eos_token }}|{{ x }}");
  testing::WriteFile(scratch + "/m.json", "[]");
  const testing::CommandResult o =
      Render("--model " + ShellQuote(testing::ModelPath("vocab/ggml-vocab-llama3.1.gguf")) +
                 " --chat-template " + scratch + "/t.jinja --messages " + scratch +
                 "/m.json --bos-token B --template-kwargs '{\"x\": 5}'",
             " 2>/dev/null");
  CHECK(o.exit_code == 0);
  CHECK(o.out == "B|<|eot_id|>|5");
}

TEST_CASE("textgen-run --render refuses bad arguments and files with exit 2", "[cli]") {
  const std::string s = testing::ScratchDir();
  testing::WriteFile(s + "/t.jinja", "{{ messages | length }}");
  testing::WriteFile(s + "/bad.jinja", "{% for x in %}");
  testing::WriteFile(s + "/m.json", R"([{"role": "user", "content": "hi"}])");
  testing::WriteFile(s + "/notjson.json", "[{");
  testing::WriteFile(s + "/obj.json", R"({"role": "user"})");
  struct Bad {
    std::string args;
    const char* says;
  };
  const Bad bad[] = {
      {"--chat-template " + s + "/t.jinja", "--messages"},
      {"--messages " + s + "/m.json --model " + s + "/none.gguf", "none.gguf"},
      {"--chat-template " + s + "/missing.jinja --messages " + s + "/m.json", "missing.jinja"},
      {"--chat-template " + s + "/bad.jinja --messages " + s + "/m.json",
       "bad.jinja: chat template: line 1"},
      {"--chat-template " + s + "/t.jinja --messages " + s + "/notjson.json", "not valid JSON"},
      {"--chat-template " + s + "/t.jinja --messages " + s + "/obj.json", "expected a JSON array"},
      {"--chat-template " + s + "/t.jinja --messages " + s + "/m.json --template-kwargs '[1]'",
       "--template-kwargs"},
      {"--model " + ShellQuote(testing::ModelPath("stories260K.gguf")) + " --messages " + s +
           "/m.json",
       "has no chat template"},
  };
  for (const Bad& b : bad) {
    INFO(b.args);
    const testing::CommandResult r = Render(b.args);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.out, Catch::Contains(b.says));
  }
  const testing::CommandResult ok =
      Render("--chat-template " + s + "/t.jinja --messages " + s + "/m.json", " 2>/dev/null");
  CHECK(ok.exit_code == 0);
  CHECK(ok.out == "1");
}

}  // namespace textgen_run_render_test
}  // namespace textgen
