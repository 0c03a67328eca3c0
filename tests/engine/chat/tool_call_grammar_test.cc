// The forced-call grammars per family: they parse (engine/grammar), accept the documented
// call forms with valid arguments and reject wrong ones; what they accept parses back to
// complete calls; the lazy forms' triggers; errors with field paths.
#include "engine/chat/tool_call_grammar.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "engine/chat/assistant_output_parser.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "nlohmann/json.hpp"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace textgen {
namespace tool_call_grammar_test {

// Ordered, as the server parses requests: arguments follow the declared property order.
nlohmann::ordered_json Tools() {
  return nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_current_weather", "parameters": {
      "type": "object",
      "properties": {"location": {"type": "string"},
                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
      "required": ["location"]}}},
    {"type": "function", "function": {"name": "get_local_time", "parameters": {
      "type": "object", "properties": {"timezone": {"type": "string"}},
      "required": ["timezone"]}}},
    {"type": "function", "function": {"name": "search_flights", "parameters": {
      "type": "object",
      "properties": {"origin": {"type": "string"}, "max_results": {"type": "integer"}},
      "required": ["origin"]}}}
  ])");
}

const ToolChoice kRequired{ToolChoiceMode::kRequired, ""};

std::shared_ptr<const Grammar> Compile(const std::string& gbnf) {
  INFO(gbnf);
  auto grammar = ParseGbnf(gbnf);
  if (!grammar.ok()) FAIL(grammar.status().ToString());
  return *grammar;
}

bool Accepts(const std::shared_ptr<const Grammar>& grammar, const std::string& text) {
  GrammarMatcher m(grammar);
  return m.AcceptString(text) && m.CanEnd();
}

std::string Required(ToolCallFormat format, bool parallel = true,
                     ReasoningSyntax reasoning = ReasoningSyntax::kNone,
                     bool starts_in_reasoning = false) {
  ToolCallGrammarOptions o;
  o.parallel_tool_calls = parallel;
  o.reasoning = reasoning;
  o.starts_in_reasoning = starts_in_reasoning;
  auto g = ToolCallGrammar(format, Tools(), kRequired, o);
  if (!g.ok()) FAIL(g.status().ToString());
  return *g;
}

// What the grammar accepts is a call the parser reads back, complete.
void CheckParses(ToolCallFormat format, ReasoningSyntax reasoning, bool starts_in_reasoning,
                 const std::string& answer, size_t calls) {
  AssistantOutputOptions o;
  o.format = format;
  o.reasoning = reasoning;
  o.starts_in_reasoning = starts_in_reasoning;
  o.tools = *ParseTools(Tools());
  const AssistantMessage m = AssistantOutputParser::ParseWhole(o, answer);
  CHECK(m.content.empty());
  REQUIRE(m.tool_calls.size() == calls);
  for (const ParsedToolCall& c : m.tool_calls) {
    CHECK(c.complete);
    CHECK(nlohmann::json::accept(c.arguments));
  }
}

struct FamilyCase {
  ToolCallFormat format;
  std::vector<std::string> single;    // accepted, one call each
  std::string parallel;               // accepted with parallel calls (two calls)
  std::vector<std::string> rejected;  // by the parallel grammar
};

const std::string kW = R"({"location": "Paris, France", "unit": "celsius"})";
const std::string kT = R"({"timezone": "Asia/Tokyo"})";

std::vector<FamilyCase> Families() {
  return {
      {ToolCallFormat::kHermes,
       {"<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": " + kW + "}\n</tool_call>",
        "<tool_call>{\"name\":\"search_flights\",\"arguments\":{\"origin\":\"NRT\",\"max_results\":"
        "3}}</tool_call>"},
       "<tool_call>\n{\"name\": \"get_local_time\", \"arguments\": " + kT +
           "}\n</tool_call>\n<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": " +
           kW + "}\n</tool_call>",
       {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + kW + "}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"P\", "
        "\"unit\": \"kelvin\"}}\n</tool_call>",
        "<tool_call>{\"name\":\"search_flights\",\"arguments\":{\"origin\":\"NRT\",\"max_results\":"
        "\"3\"}}</tool_call>",
        "<tool_call>{\"name\":\"search_flights\",\"arguments\":{\"max_results\":3,\"origin\":"
        "\"NRT\"}}</tool_call>",
        "Sure! <tool_call>\n{\"name\": \"get_local_time\", \"arguments\": " + kT +
            "}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_local_time\", \"arguments\": " + kT + "}\n",
        "<tool_call>\n{\"arguments\": " + kT + ", \"name\": \"get_local_time\"}\n</tool_call>",
        ""}},
      {ToolCallFormat::kQwen3CoderXml,
       {"<tool_call>\n<function=get_current_weather>\n<parameter=location>\nParis, France\n"
        "</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_current_weather>\n<parameter=location>\nline 1\n\"line\" 2 "
        "</param\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=search_flights>\n<parameter=origin>\nNRT\n</parameter>\n"
        "<parameter=max_results>\n12\n</parameter>\n</function>\n</tool_call>"},
       "<tool_call>\n<function=get_local_time>\n<parameter=timezone>\nUTC\n</parameter>\n"
       "</function>\n</tool_call>\n<tool_call>\n<function=get_local_time>\n<parameter=timezone>"
       "\nCET\n</parameter>\n</function>\n</tool_call>",
       {"<tool_call>\n<function=get_current_weather>\n</function>\n</tool_call>",
        "<tool_call>\n<function=search_flights>\n<parameter=origin>\nNRT\n</parameter>\n"
        "<parameter=max_results>\ntwelve\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=search_flights>\n<parameter=max_results>\n12\n</parameter>\n"
        "<parameter=origin>\nNRT\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_local_time>\n<parameter=timezone>\nU</parameter>TC\n"
        "</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=nope>\n</function>\n</tool_call>"}},
      {ToolCallFormat::kLlama3Json,
       {"{\"name\": \"get_current_weather\", \"parameters\": " + kW + "}"},
       "",
       {"{\"name\": \"get_current_weather\", \"arguments\": " + kW + "}",
        "{\"name\": \"get_local_time\", \"parameters\": " + kT +
            "}; {\"name\": \"get_local_time\", \"parameters\": " + kT + "}",
        "<|python_tag|>{\"name\": \"get_local_time\", \"parameters\": " + kT + "}"}},
      {ToolCallFormat::kMistralV3,
       {"[TOOL_CALLS][{\"name\": \"get_local_time\", \"arguments\": " + kT +
        ", \"id\": \"aB3dE6gH9\"}]"},
       "[TOOL_CALLS] [{\"name\": \"get_local_time\", \"arguments\": " + kT +
           ", \"id\": \"aB3dE6gH9\"}, {\"name\": \"get_current_weather\", \"arguments\": " + kW +
           ", \"id\": \"Zz9Yy8Xx7\"}]",
       {"[TOOL_CALLS][{\"name\": \"get_local_time\", \"arguments\": " + kT + "}]",
        "[TOOL_CALLS][{\"name\": \"get_local_time\", \"arguments\": " + kT +
            ", \"id\": \"call_1\"}]"}},
      {ToolCallFormat::kMistralArgs,
       {"[TOOL_CALLS]get_local_time[ARGS]" + kT,
        "[TOOL_CALLS]get_local_time[CALL_ID]aB3dE6gH9[ARGS]" + kT},
       "[TOOL_CALLS]get_local_time[ARGS]" + kT + "[TOOL_CALLS]get_current_weather[ARGS]" + kW,
       {"[TOOL_CALLS]get_local_time[ARGS]{}", "[TOOL_CALLS] get_local_time[ARGS]" + kT,
        "[TOOL_CALLS]get_local_time[CALL_ID]x[ARGS]" + kT}},
      {ToolCallFormat::kPhi4Mini,
       {"<|tool_call|>[{\"name\": \"get_local_time\", \"arguments\": " + kT + "}]<|/tool_call|>"},
       "<|tool_call|>[{\"name\": \"get_local_time\", \"arguments\": " + kT +
           "}, {\"name\": \"get_current_weather\", \"arguments\": " + kW + "}]<|/tool_call|>",
       {"<|tool_call|>[{\"name\": \"get_local_time\", \"arguments\": " + kT + "}]"}},
      {ToolCallFormat::kNemotronV2,
       {"<TOOLCALL>[{\"name\": \"get_local_time\", \"arguments\": " + kT + "}]</TOOLCALL>"},
       "<TOOLCALL>[{\"name\": \"get_local_time\", \"arguments\": " + kT +
           "}, {\"name\": \"get_current_weather\", \"arguments\": " + kW + "}]</TOOLCALL>",
       {"<TOOLCALL>{\"name\": \"get_local_time\", \"arguments\": " + kT + "}</TOOLCALL>"}},
      {ToolCallFormat::kGenericJson,
       {"{\"tool_calls\": [{\"name\": \"get_local_time\", \"arguments\": " + kT + "}]}"},
       "{\"tool_calls\": [{\"name\": \"get_local_time\", \"arguments\": " + kT +
           "}, {\"name\": \"get_current_weather\", \"arguments\": " + kW + "}]}",
       {"{\"response\": \"hi\"}", "{\"tool_calls\": []}"}},
  };
}

TEST_CASE("required grammars accept each family's calls and reject wrong ones",
          "[tool_call_grammar]") {
  for (const FamilyCase& f : Families()) {
    INFO(ToolCallFormatName(f.format));
    const auto parallel = Compile(Required(f.format, true));
    const auto single = Compile(Required(f.format, false));
    for (const std::string& text : f.single) {
      INFO(text);
      CHECK(Accepts(parallel, text));
      CHECK(Accepts(single, text));
      CheckParses(f.format, ReasoningSyntax::kNone, false, text, 1);
    }
    if (!f.parallel.empty()) {
      INFO(f.parallel);
      CHECK(Accepts(parallel, f.parallel));
      CHECK_FALSE(Accepts(single, f.parallel));
      CheckParses(f.format, ReasoningSyntax::kNone, false, f.parallel, 2);
    }
    for (const std::string& text : f.rejected) {
      INFO("rejected: " << text);
      CHECK_FALSE(Accepts(parallel, text));
    }
  }
}

TEST_CASE("the generic grammar without parallel calls wants one tool_call", "[tool_call_grammar]") {
  const auto g = Compile(Required(ToolCallFormat::kGenericJson, false));
  CHECK(Accepts(g, "{\"tool_call\": {\"name\": \"get_local_time\", \"arguments\": " + kT + "}}"));
  CheckParses(ToolCallFormat::kGenericJson, ReasoningSyntax::kNone, false,
              "{\"tool_call\": {\"name\": \"get_local_time\", \"arguments\": " + kT + "}}", 1);
}

TEST_CASE("a reasoning block may come first, or must be closed when the prompt opened it",
          "[tool_call_grammar]") {
  const std::string call =
      "<tool_call>\n{\"name\": \"get_local_time\", \"arguments\": " + kT + "}\n</tool_call>";
  const auto optional =
      Compile(Required(ToolCallFormat::kHermes, true, ReasoningSyntax::kThinkTags, false));
  CHECK(Accepts(optional, call));
  CHECK(Accepts(optional, "<think>\nThe time in Tokyo.\n</think>\n\n" + call));
  CHECK(Accepts(optional, "<think></think>" + call));
  CHECK_FALSE(Accepts(optional, "<think>\nnever closed " + call));
  CHECK_FALSE(Accepts(optional, "Preamble " + call));
  CheckParses(ToolCallFormat::kHermes, ReasoningSyntax::kThinkTags, false,
              "<think>\nThe time in Tokyo.\n</think>\n\n" + call, 1);
  const auto open =
      Compile(Required(ToolCallFormat::kHermes, true, ReasoningSyntax::kThinkTags, true));
  CHECK(Accepts(open, "Tokyo is UTC+9 </thin </think>\n\n" + call));
  CHECK_FALSE(Accepts(open, call));
  CheckParses(ToolCallFormat::kHermes, ReasoningSyntax::kThinkTags, true,
              "Tokyo is UTC+9 </thin </think>\n\n" + call, 1);
  // Reasoning text is anything without the closing tag: random texts of its letters.
  std::mt19937 rng(5);
  const std::string letters = "</thinkx>";
  for (int round = 0; round < 400; ++round) {
    std::string text;
    const int n = rng() % 14;
    for (int i = 0; i < n; ++i) text.push_back(letters[rng() % letters.size()]);
    INFO(text);
    CHECK(Accepts(open, text + "</think>" + call) == (text.find("</think>") == std::string::npos));
  }
  const auto mistral =
      Compile(Required(ToolCallFormat::kMistralArgs, true, ReasoningSyntax::kMistralThink, false));
  CHECK(Accepts(mistral, "[THINK]a [/THIN b[/THINK][TOOL_CALLS]get_local_time[ARGS]" + kT));
}

TEST_CASE("a named choice allows that function once", "[tool_call_grammar]") {
  const auto g = Compile(*ToolCallGrammar(ToolCallFormat::kHermes, nlohmann::json(Tools()),
                                          {ToolChoiceMode::kNamed, "get_local_time"}, true));
  const std::string call =
      "<tool_call>\n{\"name\": \"get_local_time\", \"arguments\": " + kT + "}\n</tool_call>";
  CHECK(Accepts(g, call));
  CHECK_FALSE(Accepts(g, call + "\n" + call));
  CHECK_FALSE(Accepts(g, "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": " + kW +
                             "}\n</tool_call>"));
}

TEST_CASE("auto: lazy grammars from their triggers, and generic JSON applies from the start",
          "[tool_call_grammar]") {
  ToolCallGrammarOptions o;
  auto hermes = AutoToolCallGrammarFor(ToolCallFormat::kHermes, Tools(), o);
  REQUIRE(hermes.ok());
  CHECK(hermes->lazy);
  REQUIRE(hermes->triggers.size() == 1);
  CHECK(hermes->triggers[0].type == GrammarTrigger::Type::kWord);
  CHECK(hermes->triggers[0].text == "<tool_call>");
  const auto hg = Compile(hermes->gbnf);
  CHECK(Accepts(
      hg, "<tool_call>\n{\"name\": \"get_local_time\", \"arguments\": " + kT + "}\n</tool_call>"));
  CHECK_FALSE(Accepts(hg, "Sure! <tool_call>"));

  auto llama = AutoToolCallGrammarFor(ToolCallFormat::kLlama3Json, Tools(), o);
  REQUIRE(llama.ok());
  REQUIRE(llama->triggers.size() == 1);
  CHECK(llama->triggers[0].type == GrammarTrigger::Type::kAtStart);
  CHECK(llama->triggers[0].text == "{");
  CHECK(
      Accepts(Compile(llama->gbnf), "{\"name\": \"get_local_time\", \"parameters\": " + kT + "}"));

  o.marker_tokens["[TOOL_CALLS]"] = 5;
  o.marker_tokens["[ARGS]"] = 32;
  auto mistral = AutoToolCallGrammarFor(ToolCallFormat::kMistralArgs, Tools(), o);
  REQUIRE(mistral.ok());
  REQUIRE(mistral->triggers.size() == 1);
  CHECK(mistral->triggers[0].type == GrammarTrigger::Type::kToken);
  CHECK(mistral->triggers[0].token == 5);
  CHECK(mistral->gbnf.find("<[5]> \"get_local_time\"") != std::string::npos);
  CHECK(mistral->gbnf.find("<[32]>") != std::string::npos);
  CHECK(mistral->gbnf.find("\"[TOOL_CALLS]\"") == std::string::npos);
  Compile(mistral->gbnf);

  auto generic = AutoToolCallGrammarFor(ToolCallFormat::kGenericJson, Tools(), {});
  REQUIRE(generic.ok());
  CHECK_FALSE(generic->lazy);
  CHECK(generic->triggers.empty());
  const auto gg = Compile(generic->gbnf);
  CHECK(Accepts(gg, R"({"response": "It is \"sunny\"\n\u00e9 \\ é"})"));
  CHECK(
      Accepts(gg, "{\"tool_calls\": [{\"name\": \"get_local_time\", \"arguments\": " + kT + "}]}"));
  CHECK_FALSE(Accepts(gg, "Plain text"));
  CHECK_FALSE(Accepts(gg, R"({"response": "lone \ud800"})"));
}

TEST_CASE("ToolCallMarkers lists the markup to look up in the vocabulary", "[tool_call_grammar]") {
  CHECK(ToolCallMarkers(ToolCallFormat::kMistralArgs, ReasoningSyntax::kMistralThink) ==
        std::vector<std::string>{"[TOOL_CALLS]", "[CALL_ID]", "[ARGS]", "[THINK]", "[/THINK]"});
  CHECK(ToolCallMarkers(ToolCallFormat::kHermes, ReasoningSyntax::kThinkTags) ==
        std::vector<std::string>{"<tool_call>", "</tool_call>", "<think>", "</think>"});
  CHECK(ToolCallMarkers(ToolCallFormat::kLlama3Json, ReasoningSyntax::kNone).empty());
}

TEST_CASE("markers as token elements match the model's own tokens (Qwen3's vocabulary)",
          "[tool_call_grammar]") {
  const Tokenizer& tok = testing::GgufTokenizer("vocab/ggml-vocab-qwen3.gguf");
  ToolCallGrammarOptions o;
  o.reasoning = ReasoningSyntax::kThinkTags;
  for (const std::string& marker : ToolCallMarkers(ToolCallFormat::kHermes, o.reasoning)) {
    const int32_t id = tok.TokenToId(marker);
    INFO(marker);
    REQUIRE(id >= 0);
    o.marker_tokens[marker] = id;
  }
  const auto gbnf = ToolCallGrammar(ToolCallFormat::kHermes, Tools(), kRequired, o);
  REQUIRE(gbnf.ok());
  CHECK(gbnf->find("<[" + std::to_string(tok.TokenToId("<tool_call>")) + "]>") !=
        std::string::npos);
  auto compiled = CompiledGrammar::Compile(Compile(*gbnf), GrammarVocab::Create(tok));
  REQUIRE(compiled.ok());
  // The answer as the model writes it: the markers are single tokens.
  const std::string answer =
      "<think>\nTokyo time.\n</think>\n\n<tool_call>\n{\"name\": "
      "\"get_local_time\", \"arguments\": " +
      kT + "}\n</tool_call>";
  const std::vector<int32_t> ids = tok.Encode(answer, false, /*parse_special=*/true);
  CHECK(std::count(ids.begin(), ids.end(), tok.TokenToId("<tool_call>")) == 1);
  GrammarMatcher m(*compiled);
  for (int32_t id : ids) {
    INFO("token " << id << " " << tok.TokenText(id));
    REQUIRE(m.AcceptToken(id));
  }
  CHECK(m.CanEnd());
  // Qwen3's markers are user-defined tokens, not control tokens: a grammar with the markers
  // as text matches them too (control tokens, such as Mistral's [TOOL_CALLS], need <[id]>).
  CHECK_FALSE(tok.IsControl(tok.TokenToId("<tool_call>")));
  ToolCallGrammarOptions text_markers;
  text_markers.reasoning = o.reasoning;
  auto literal = CompiledGrammar::Compile(
      Compile(*ToolCallGrammar(ToolCallFormat::kHermes, Tools(), kRequired, text_markers)),
      GrammarVocab::Create(tok));
  REQUIRE(literal.ok());
  GrammarMatcher lm(*literal);
  for (int32_t id : ids) REQUIRE(lm.AcceptToken(id));
  CHECK(lm.CanEnd());
}

TEST_CASE("the generic system prompt describes the tools and the shapes the grammar accepts",
          "[tool_call_grammar]") {
  const std::vector<ToolSpec> tools = *ParseTools(Tools());
  const std::string parallel = GenericToolSystemPrompt(tools, true);
  CHECK(parallel.find("\"get_local_time\"") != std::string::npos);
  CHECK(parallel.find("\"timezone\"") != std::string::npos);
  CHECK(parallel.find("{\"tool_calls\": [") != std::string::npos);
  CHECK(parallel.find("{\"response\": ") != std::string::npos);
  CHECK(GenericToolSystemPrompt(tools, false).find("{\"tool_call\": {") != std::string::npos);
}

TEST_CASE("grammar errors name the field", "[tool_call_grammar]") {
  auto error = [](ToolCallFormat f, const nlohmann::ordered_json& tools, const ToolChoice& c) {
    ToolCallGrammarOptions o;
    const auto g = ToolCallGrammar(f, tools, c, o);
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(g.status().message());
  };
  nlohmann::ordered_json tools = Tools();
  tools[1]["function"]["parameters"]["properties"]["timezone"]["not"] = {{"type", "null"}};
  const std::string m = error(ToolCallFormat::kHermes, tools, kRequired);
  INFO(m);
  CHECK(m.rfind("tools[1].function.parameters: ", 0) == 0);
  CHECK(m.find("\"not\"") != std::string::npos);
  CHECK(m.find("/properties/timezone") != std::string::npos);
  const std::string xml = error(ToolCallFormat::kQwen3CoderXml, tools, kRequired);
  CHECK(xml.rfind("tools[1].function.parameters", 0) == 0);

  nlohmann::ordered_json bad_name = Tools();
  bad_name[2]["function"]["name"] = "search flights";
  CHECK(error(ToolCallFormat::kHermes, bad_name, kRequired).rfind("tools[2].function.name:", 0) ==
        0);
  CHECK(error(ToolCallFormat::kUnsupported, Tools(), kRequired).rfind("tools:", 0) == 0);
  CHECK(error(ToolCallFormat::kHermes, nlohmann::ordered_json::array(), kRequired) ==
        "tools: must not be empty");
  CHECK(error(ToolCallFormat::kHermes, Tools(), {ToolChoiceMode::kAuto, ""})
            .rfind("tool_choice:", 0) == 0);
  CHECK(error(ToolCallFormat::kHermes, Tools(), {ToolChoiceMode::kNamed, "nope"}) ==
        "tool_choice.function.name: \"nope\" is not one of the tools");
  nlohmann::ordered_json xml_name = Tools();
  xml_name[1]["function"]["parameters"]["properties"]["a>b"] = {{"type", "string"}};
  CHECK(error(ToolCallFormat::kQwen3CoderXml, xml_name, kRequired)
            .rfind("tools[1].function.parameters.properties:", 0) == 0);
}

}  // namespace tool_call_grammar_test

namespace tool_call_grammar_walk_test {

// A random sentence of `grammar`: byte by byte, each step a random byte the grammar allows
// (what a model with noise weights does under the constraint), until it must end or may end and
// a coin says so.
std::string RandomSentence(const std::shared_ptr<const Grammar>& grammar, std::mt19937_64& rng) {
  GrammarMatcher m(grammar);
  std::string out;
  for (int step = 0; step < 1500; ++step) {
    if (m.IsTerminated() || (m.CanEnd() && rng() % 8 == 0)) break;
    std::vector<char> allowed;
    for (int b = 0; b < 256; ++b) {
      GrammarMatcher probe = m;
      const char c = static_cast<char>(b);
      if (probe.AcceptString(std::string_view(&c, 1))) allowed.push_back(c);
    }
    if (allowed.empty()) break;
    // Inside a free string nearly every byte is allowed and only '"' ends it: half the time the
    // pick is among the punctuation bytes, so strings and sentences end within a few hundred
    // bytes (a uniform pick wrote ~200-byte strings and took minutes over all formats).
    std::vector<char> punct;
    for (char a : allowed) {
      if (absl::ascii_ispunct(static_cast<unsigned char>(a))) punct.push_back(a);
    }
    const std::vector<char>& from = (!punct.empty() && rng() % 2 == 0) ? punct : allowed;
    const char c = from[rng() % from.size()];
    if (!m.AcceptString(std::string_view(&c, 1))) FAIL("an allowed byte was refused");
    out.push_back(c);
  }
  return out;
}

TEST_CASE("whatever a required grammar lets a model write parses as complete calls",
          "[tool_call_grammar]") {
  // The grammar decides what a noise model writes; the parser must then read calls, never
  // content, from every such answer (the server reports what the parser reads).
  std::mt19937_64 rng(7);
  for (ToolCallFormat format :
       {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistralV3,
        ToolCallFormat::kMistralArgs, ToolCallFormat::kPhi4Mini, ToolCallFormat::kNemotronV2,
        ToolCallFormat::kGenericJson, ToolCallFormat::kQwen3CoderXml}) {
    const auto grammar = tool_call_grammar_test::Compile(tool_call_grammar_test::Required(format));
    AssistantOutputOptions o;
    o.format = format;
    o.tools = *ParseTools(tool_call_grammar_test::Tools());
    o.tool_choice = tool_call_grammar_test::kRequired;
    for (int i = 0; i < 5; ++i) {
      const std::string answer = RandomSentence(grammar, rng);
      INFO(ToolCallFormatName(format) << " answer: [" << answer << "]");
      GrammarMatcher m(grammar);
      if (!(m.AcceptString(answer) && m.CanEnd())) continue;  // hit the step bound
      const AssistantMessage msg = AssistantOutputParser::ParseWhole(o, answer);
      CHECK(!msg.tool_calls.empty());
      for (const ParsedToolCall& c : msg.tool_calls) CHECK(c.complete);
      CHECK(absl::StripAsciiWhitespace(msg.content).empty());
    }
  }
}

}  // namespace tool_call_grammar_walk_test
}  // namespace textgen
