// Every (template, conversation, add_generation_prompt) of ../shared/chat-templates rendered
// by ChatTemplate and compared byte for byte with what Python jinja2 renders with Hugging
// Face's settings; the cases jinja2 raises on must be errors here too.
#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <map>
#include <string>

#include "engine/chat/chat_template.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace textgen {
namespace chat_template_reference_test {

using nlohmann::ordered_json;

// render_expected.py fixes strftime_now's clock at 2026-11-20 12:00:00 (naive local time).
std::chrono::system_clock::time_point FixedNow() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 10;
  tm.tm_mday = 20;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  return std::chrono::system_clock::from_time_t(std::mktime(&tm));
}

// Where two texts first differ, with a little context, for the failure message.
std::string FirstDifference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "at byte " + std::to_string(i) + "\n    got:  " +
         ordered_json(got.substr(from, 100))
             .dump(-1, ' ', false, ordered_json::error_handler_t::replace) +
         "\n    want: " +
         ordered_json(want.substr(from, 100))
             .dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

TEST_CASE("chat templates render what Python jinja2 renders, byte for byte") {
  const std::string dir = testing::ChatTemplatesDir();
  const ordered_json manifest =
      ordered_json::parse(testing::ReadFile(dir + "/expected/manifest.json"));
  std::map<std::string, absl::StatusOr<ChatTemplate>> templates;
  std::map<std::string, ordered_json> conversations;
  int rendered = 0, raised = 0;
  std::string failures;
  int n_failures = 0;
  for (const ordered_json& c : manifest["cases"]) {
    const std::string tpath = c["template"];
    auto t = templates.find(tpath);
    if (t == templates.end()) {
      t = templates.emplace(tpath, ChatTemplate::Parse(testing::ReadFile(dir + "/" + tpath))).first;
    }
    const std::string cpath = c["conversation"];
    if (!conversations.count(cpath)) {
      conversations[cpath] = ordered_json::parse(testing::ReadFile(dir + "/" + cpath));
    }
    const ordered_json& conv = conversations[cpath];
    ChatTemplateInput input;
    input.messages = conv["messages"];
    if (conv.contains("tools") && !conv["tools"].is_null()) input.tools = conv["tools"];
    input.add_generation_prompt = c["add_generation_prompt"];
    if (!c["bos_token"].is_null()) input.bos_token = c["bos_token"].get<std::string>();
    if (!c["eos_token"].is_null()) input.eos_token = c["eos_token"].get<std::string>();
    input.now = FixedNow();
    const absl::StatusOr<std::string> got =
        t->second.ok() ? t->second->Render(input) : absl::StatusOr<std::string>(t->second.status());
    const std::string name = tpath + " + " + cpath + (input.add_generation_prompt ? " agp" : "");
    if (c["expected"].is_null()) {
      ++raised;
      if (got.ok()) {
        ++n_failures;
        failures += "  " + name + ": rendered, jinja2 raised " +
                    c["expected_error"]["type"].get<std::string>() + ": " +
                    c["expected_error"]["message"].get<std::string>() + "\n";
      }
      continue;
    }
    ++rendered;
    const std::string want = testing::ReadFile(dir + "/" + c["expected"].get<std::string>());
    if (!got.ok()) {
      ++n_failures;
      failures += "  " + name + ": " + std::string(got.status().message()) + "\n";
    } else if (*got != want) {
      ++n_failures;
      failures += "  " + name + ": differs " + FirstDifference(*got, want) + "\n";
    }
  }
  INFO(n_failures << " of " << rendered + raised << " cases differ:\n" << failures);
  CHECK(rendered + raised == 2160);
  CHECK(n_failures == 0);
}

}  // namespace chat_template_reference_test
}  // namespace textgen
