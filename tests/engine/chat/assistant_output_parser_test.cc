// Parsing each family's documented answers into content, reasoning and tool calls; the same
// result however the answer is split (every byte boundary, every byte alone, random chunks),
// with events that reassemble exactly to it and never leak markup into content.
#include "engine/chat/assistant_output_parser.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace textgen {
namespace assistant_output_parser_test {

using Type = AssistantOutputEvent::Type;

std::vector<ToolSpec> Tools() {
  auto tool = [](std::string name, nlohmann::json properties) {
    return ToolSpec{
        std::move(name), "", {{"type", "object"}, {"properties", std::move(properties)}}};
  };
  return {
      tool("get_current_weather", {{"location", {{"type", "string"}}},
                                   {"unit", {{"type", "string"}, {"enum", {"celsius", "f"}}}}}),
      tool("get_local_time", {{"timezone", {{"type", "string"}}}}),
      tool("search_flights", {{"origin", {{"type", "string"}}},
                              {"max_results", {{"type", "integer"}}},
                              {"direct", {{"type", "boolean"}}},
                              {"dates", {{"type", "array"}, {"items", {{"type", "string"}}}}}}),
      tool("brave_search", {{"query", {{"type", "string"}}}}),
      tool("python", {{"code", {{"type", "string"}}}}),
  };
}

AssistantOutputOptions Options(ToolCallFormat format,
                               ReasoningSyntax reasoning = ReasoningSyntax::kNone) {
  AssistantOutputOptions o;
  o.format = format;
  o.reasoning = reasoning;
  o.tools = Tools();
  o.id_seed = 7;
  return o;
}

struct Call {
  Call(std::string n, std::string a, bool c = true, std::string i = "")
      : name(std::move(n)), arguments(std::move(a)), complete(c), id(std::move(i)) {}
  std::string name;
  std::string arguments;
  bool complete;
  std::string id;  // checked when not empty
};

struct Want {
  std::string content;
  std::string reasoning;
  std::vector<Call> calls;
};

// Checks the events' order: a call's events come begin, arguments, end, before any other.
void CheckEventOrder(const std::vector<AssistantOutputEvent>& events) {
  int open = -1, next = 0;
  for (const AssistantOutputEvent& e : events) {
    switch (e.type) {
      case Type::kToolCallBegin:
        CHECK(open == -1);
        CHECK(e.tool_index == next);
        open = next++;
        break;
      case Type::kToolCallArguments:
        CHECK(e.tool_index == open);
        break;
      case Type::kToolCallEnd:
        CHECK(e.tool_index == open);
        open = -1;
        break;
      case Type::kContent:
      case Type::kReasoning:
        CHECK(open == -1);
        break;
    }
  }
  CHECK(open == -1);
}

AssistantMessage Parse(const AssistantOutputOptions& options, const std::string& answer,
                       const std::vector<size_t>& cuts) {
  AssistantOutputParser parser(options);
  std::vector<AssistantOutputEvent> events;
  size_t from = 0;
  for (size_t cut : cuts) {
    parser.Feed(std::string_view(answer).substr(from, cut - from), &events);
    from = cut;
  }
  parser.Feed(std::string_view(answer).substr(from), &events);
  parser.Finish(&events);
  CheckEventOrder(events);
  AssistantMessage m;
  m.Apply(events);
  return m;
}

std::string Describe(const AssistantMessage& m) {
  return m.ToOpenAiMessage().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool Same(const AssistantMessage& a, const AssistantMessage& b) {
  if (a.content != b.content || a.reasoning != b.reasoning ||
      a.tool_calls.size() != b.tool_calls.size()) {
    return false;
  }
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    const ParsedToolCall& x = a.tool_calls[i];
    const ParsedToolCall& y = b.tool_calls[i];
    if (x.id != y.id || x.name != y.name || x.arguments != y.arguments ||
        x.complete != y.complete) {
      return false;
    }
  }
  return true;
}

// Parses `answer` whole, checks it against `want`, then split every other way.
void Check(const AssistantOutputOptions& options, const std::string& answer, const Want& want) {
  INFO("answer: " << nlohmann::json(answer).dump());
  const AssistantMessage whole = AssistantOutputParser::ParseWhole(options, answer);
  INFO("whole: " << Describe(whole));
  CHECK(whole.content == want.content);
  CHECK(whole.reasoning == want.reasoning);
  REQUIRE(whole.tool_calls.size() == want.calls.size());
  for (size_t i = 0; i < want.calls.size(); ++i) {
    const ParsedToolCall& got = whole.tool_calls[i];
    CHECK(got.name == want.calls[i].name);
    CHECK(got.arguments == want.calls[i].arguments);
    CHECK(got.complete == want.calls[i].complete);
    if (!want.calls[i].id.empty()) {
      CHECK(got.id == want.calls[i].id);
    } else if (options.format == ToolCallFormat::kMistralV3 ||
               options.format == ToolCallFormat::kMistralArgs) {
      CHECK(got.id.size() == 9);
    } else {
      CHECK(got.id.size() == 29);
      CHECK(got.id.rfind("call_", 0) == 0);
    }
    if (got.complete) {
      CHECK(nlohmann::json::accept(got.arguments));
      CHECK(nlohmann::json::parse(got.arguments).is_object());
    }
  }
  // Same Parse() as a split, with no cut: the harness itself agrees with ParseWhole.
  REQUIRE(Same(Parse(options, answer, {}), whole));
  for (size_t cut = 1; cut < answer.size(); ++cut) {
    const AssistantMessage split = Parse(options, answer, {cut});
    if (!Same(split, whole)) {
      FAIL("split at " << cut << ": " << Describe(split));
    }
  }
  std::vector<size_t> every;
  for (size_t i = 1; i < answer.size(); ++i) every.push_back(i);
  const AssistantMessage bytes = Parse(options, answer, every);
  if (!Same(bytes, whole)) FAIL("byte by byte: " << Describe(bytes));
  std::mt19937 rng(answer.size());
  for (int round = 0; round < 20; ++round) {
    std::vector<size_t> cuts;
    size_t at = 0;
    while (true) {
      at += 1 + rng() % 7;
      if (at >= answer.size()) break;
      cuts.push_back(at);
    }
    const AssistantMessage chunks = Parse(options, answer, cuts);
    if (!Same(chunks, whole)) FAIL("chunks, round " << round << ": " << Describe(chunks));
  }
}

const std::string kWeatherArgs = R"({"location": "Paris, France", "unit": "celsius"})";
const std::string kTimeArgs = R"({"timezone": "Asia/Tokyo"})";

TEST_CASE("Hermes: single and parallel calls, content around them", "[assistant_output_parser]") {
  const auto o = Options(ToolCallFormat::kHermes);
  const std::string call1 =
      "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": " + kWeatherArgs +
      "}\n</tool_call>";
  const std::string call2 =
      "<tool_call>\n{\"name\": \"get_local_time\", \"arguments\": " + kTimeArgs + "}\n</tool_call>";
  Check(o, call1, {"", "", {{"get_current_weather", kWeatherArgs}}});
  Check(o, call1 + "\n" + call2,
        {"", "", {{"get_current_weather", kWeatherArgs}, {"get_local_time", kTimeArgs}}});
  Check(o, "Let me check.\n\n" + call1,
        {"Let me check.", "", {{"get_current_weather", kWeatherArgs}}});
  Check(o, call1 + "\nI asked the weather service.",
        {"I asked the weather service.", "", {{"get_current_weather", kWeatherArgs}}});
  Check(o, "No tools needed: 2 < 3 and <b>bold</b> <tool>",
        {"No tools needed: 2 < 3 and <b>bold</b> <tool>", "", {}});
  Check(o, "Trailing spaces stay  \n", {"Trailing spaces stay  \n", "", {}});
  // The call object's other shapes: arguments first, nested "function", a list in one block.
  Check(o,
        "<tool_call>{\"arguments\": {\"timezone\": \"UTC\"}, \"name\": "
        "\"get_local_time\"}</tool_call>",
        {"", "", {{"get_local_time", R"({"timezone": "UTC"})"}}});
  Check(o,
        "<tool_call>{\"type\": \"function\", \"function\": {\"name\": \"get_local_time\", "
        "\"arguments\": {}}}</tool_call>",
        {"", "", {{"get_local_time", "{}"}}});
  Check(o,
        "<tool_call>[{\"name\": \"get_local_time\", \"arguments\": {\"timezone\": \"UTC\"}}, "
        "{\"name\": \"get_local_time\", \"arguments\": {\"timezone\": \"CET\"}}]</tool_call>",
        {"",
         "",
         {{"get_local_time", R"({"timezone": "UTC"})"},
          {"get_local_time", R"({"timezone": "CET"})"}}});
  Check(o, "<tool_call>\n{\"name\": \"get_local_time\"}\n</tool_call>",
        {"", "", {{"get_local_time", "{}"}}});
  // Arguments keep the model's bytes: escapes, unicode, nesting, numbers.
  const std::string odd =
      R"({"origin": "Z\u00fcrich \"HB\" \\ é 😀", "max_results": -1.5e+3, "direct": false, "dates": ["a", []], "x": null})";
  Check(o, "<tool_call>{\"name\": \"search_flights\", \"arguments\": " + odd + "}</tool_call>",
        {"", "", {{"search_flights", odd}}});
}

TEST_CASE("Hermes with reasoning first (Qwen3, QwQ)", "[assistant_output_parser]") {
  auto o = Options(ToolCallFormat::kHermes, ReasoningSyntax::kThinkTags);
  const std::string call =
      "<tool_call>\n{\"name\": \"get_local_time\", \"arguments\": " + kTimeArgs + "}\n</tool_call>";
  Check(o, "<think>\nThe user wants the time.\nI will call the tool.\n</think>\n\n" + call,
        {"", "The user wants the time.\nI will call the tool.", {{"get_local_time", kTimeArgs}}});
  Check(o, "<think>\n\n</think>\n\nHello!", {"Hello!", "", {}});
  Check(o, "<think>short</think>Answer <think> is text here",
        {"Answer <think> is text here", "short", {}});
  // The reasoning may mention the markup: it stays reasoning.
  Check(o, "<think>Should I write <tool_call>?</think>No.",
        {"No.", "Should I write <tool_call>?", {}});
  // Cut off while thinking.
  Check(o, "<think>\nStill thinking", {"", "Still thinking", {}});
  o.starts_in_reasoning = true;  // DeepSeek-R1 distills: the prompt ended with "<think>\n"
  Check(o, "Okay, so 2+2.\n</think>\n\nIt is 4.", {"It is 4.", "Okay, so 2+2.", {}});
  Check(o, "Plan.\n</think>\n\n" + call, {"", "Plan.", {{"get_local_time", kTimeArgs}}});
}

TEST_CASE("botched calls are content, verbatim, and a cut-off call is incomplete",
          "[assistant_output_parser]") {
  const auto o = Options(ToolCallFormat::kHermes);
  for (const std::string answer : {
           "<tool_call>\n{\"name\": \"unknown_tool\", \"arguments\": {}}\n</tool_call>",
           "<tool_call>\n{\"name\": get_local_time}\n</tool_call>",
           "<tool_call>\n{\"name\": \"get_local_time\", \"arguments\": \"{}\"}\n</tool_call>",
           "<tool_call>\n{\"name\": \"get_local_time\", \"extra\": 1}\n</tool_call>",
           "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
           "<tool_call>\nnot json at all\n</tool_call>",
           "<tool_call>\n{\"name\": \"get_local_ti",
           "<tool_call>",
           "<tool_call",
       }) {
    Check(o, answer, {answer, "", {}});
  }
  Check(o, "Sure.\n<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>",
        {"Sure.\n<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>", "", {}});
  // A botched block does not stop a later good one.
  Check(o,
        "<tool_call>{\"name\": \"nope\"}</tool_call>\n<tool_call>{\"name\": \"get_local_time\", "
        "\"arguments\": {}}</tool_call>",
        {"<tool_call>{\"name\": \"nope\"}</tool_call>", "", {{"get_local_time", "{}"}}});
  // Cut off inside the arguments (max_tokens): the call began, and ends incomplete.
  Check(o, "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Par",
        {"", "", {{"get_current_weather", "{\"location\": \"Par", false}}});
  // The JSON breaks after the call began: the call ends there; the rest is content, the
  // closing tag swallowed when it follows.
  Check(o,
        "<tool_call>{\"name\": \"get_local_time\", \"arguments\": {\"timezone\": UTC}}</tool_call>",
        {"UTC}}</tool_call>", "", {{"get_local_time", "{\"timezone\": ", false}}});
  Check(o, "<tool_call>{\"name\": \"get_local_time\", \"arguments\": {}\n</tool_call>\nDone",
        {"Done", "", {{"get_local_time", "{}", true}}});
  // The model's raw newline in a string is not JSON.
  Check(o,
        "<tool_call>{\"name\": \"get_local_time\", \"arguments\": {\"timezone\": "
        "\"a\nb\"}}</tool_call>",
        {"b\"}}</tool_call>", "", {{"get_local_time", "{\"timezone\": \"a", false}}});
}

TEST_CASE("tool_choice none, no tools, unsupported formats: everything is content",
          "[assistant_output_parser]") {
  const std::string answer =
      "  <tool_call>\n{\"name\": \"get_local_time\", \"arguments\": {}}\n</tool_call>\n";
  auto o = Options(ToolCallFormat::kHermes);
  o.tool_choice.mode = ToolChoiceMode::kNone;
  Check(o, answer, {answer, "", {}});
  o = Options(ToolCallFormat::kHermes);
  o.tools.clear();
  Check(o, answer, {answer, "", {}});
  o = Options(ToolCallFormat::kUnsupported);
  Check(o, answer, {answer, "", {}});
  // Reasoning format none: a <think> block is content too (today's behaviour).
  o = Options(ToolCallFormat::kHermes);
  o.tool_choice.mode = ToolChoiceMode::kNone;
  Check(o, "<think>\nhm\n</think>\n\nHi", {"<think>\nhm\n</think>\n\nHi", "", {}});
}

TEST_CASE("a named tool_choice accepts that function only", "[assistant_output_parser]") {
  auto o = Options(ToolCallFormat::kHermes);
  o.tool_choice = {ToolChoiceMode::kNamed, "get_local_time"};
  Check(o, "<tool_call>{\"name\": \"get_local_time\", \"arguments\": {}}</tool_call>",
        {"", "", {{"get_local_time", "{}"}}});
  const std::string other =
      "<tool_call>{\"name\": \"get_current_weather\", \"arguments\": {}}</tool_call>";
  Check(o, other, {other, "", {}});
}

TEST_CASE("Qwen3-Coder XML calls", "[assistant_output_parser]") {
  const auto o = Options(ToolCallFormat::kQwen3CoderXml, ReasoningSyntax::kThinkTags);
  const std::string weather =
      "<tool_call>\n<function=get_current_weather>\n<parameter=location>\nParis, France\n"
      "</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>";
  Check(o, weather, {"", "", {{"get_current_weather", kWeatherArgs}}});
  Check(o, "I'll look.\n" + weather + "\n" + weather,
        {"I'll look.",
         "",
         {{"get_current_weather", kWeatherArgs}, {"get_current_weather", kWeatherArgs}}});
  Check(o, "<think>\nweather?\n</think>\n\n" + weather,
        {"", "weather?", {{"get_current_weather", kWeatherArgs}}});
  // Typed parameters are JSON; strings keep their lines, quotes and look-alike tags.
  Check(
      o,
      "<tool_call>\n<function=search_flights>\n<parameter=origin>\nline \"1\"\n</param> \\ "
      "</parameter\n\tend\n</parameter>\n<parameter=max_results>\n5\n</parameter>\n"
      "<parameter=direct>\ntrue\n</parameter>\n<parameter=dates>\n[\"2026-12-01\"]\n"
      "</parameter>\n<parameter=unknown>\nnot json\n</parameter>\n</function>\n</tool_call>",
      {"",
       "",
       {{"search_flights",
         R"({"origin": "line \"1\"\n</param> \\ </parameter\n\tend", "max_results": 5, "direct": true, "dates": ["2026-12-01"], "unknown": "not json"})"}}});
  Check(o, "<tool_call>\n<function=get_local_time>\n</function>\n</tool_call>",
        {"", "", {{"get_local_time", "{}"}}});
  // Seed-style values without the newlines.
  Check(o,
        "<tool_call><function=get_local_time><parameter=timezone>UTC</parameter></function></"
        "tool_call>",
        {"", "", {{"get_local_time", R"({"timezone": "UTC"})"}}});
  const std::string unknown = "<tool_call>\n<function=nope>\n</function>\n</tool_call>";
  Check(o, unknown, {unknown, "", {}});
  Check(o, "<tool_call>\n<function=get_local_time>\n<parameter=timezone>\nAsia/To",
        {"", "", {{"get_local_time", R"({"timezone": "Asia/To)", false}}});
}

TEST_CASE("Llama 3.x JSON calls, <|python_tag|> and built-in tools", "[assistant_output_parser]") {
  const auto o = Options(ToolCallFormat::kLlama3Json);
  const std::string args = R"({"location": "Paris, France"})";
  Check(o, "{\"name\": \"get_current_weather\", \"parameters\": " + args + "}",
        {"", "", {{"get_current_weather", args}}});
  Check(o,
        "\n\n{\"type\": \"function\", \"name\": \"get_current_weather\", \"parameters\": " + args +
            "}",
        {"", "", {{"get_current_weather", args}}});
  Check(o,
        "{\"name\": \"get_current_weather\", \"parameters\": " + args +
            "}; {\"name\": \"get_local_time\", \"parameters\": " + kTimeArgs + "}",
        {"", "", {{"get_current_weather", args}, {"get_local_time", kTimeArgs}}});
  Check(o, "<|python_tag|>{\"name\": \"get_local_time\", \"parameters\": " + kTimeArgs + "}",
        {"", "", {{"get_local_time", kTimeArgs}}});
  Check(o, "<|python_tag|>brave_search.call(query=\"weather in \\\"Paris\\\"\")",
        {"", "", {{"brave_search", R"({"query":"weather in \"Paris\""})"}}});
  Check(o, "<|python_tag|>search_flights.call(origin='NRT', max_results=3, direct=True)",
        {"", "", {{"search_flights", R"({"origin":"NRT","max_results":3,"direct":true})"}}});
  Check(o, "<|python_tag|>print(6 * 7)", {"", "", {{"python", R"j({"code":"print(6 * 7)"})j"}}});
  // Plain answers, and JSON that is not a call, are content.
  Check(o, "The capital of France is Paris.", {"The capital of France is Paris.", "", {}});
  Check(o, "{\"result\": 4}", {"{\"result\": 4}", "", {}});
  Check(o, "Here: {\"name\": \"get_local_time\", \"parameters\": {}}",
        {"Here: {\"name\": \"get_local_time\", \"parameters\": {}}", "", {}});
  auto no_python = o;
  no_python.tools.pop_back();
  Check(no_python, "<|python_tag|>print(1)", {"<|python_tag|>print(1)", "", {}});
}

TEST_CASE("Mistral v3 calls keep the model's ids", "[assistant_output_parser]") {
  const auto o = Options(ToolCallFormat::kMistralV3);
  Check(o,
        "[TOOL_CALLS] [{\"name\": \"get_current_weather\", \"arguments\": " + kWeatherArgs +
            ", \"id\": \"aB3dE6gH9\"}, {\"name\": \"get_local_time\", \"arguments\": " + kTimeArgs +
            ", \"id\": \"Zz9Yy8Xx7\"}]",
        {"",
         "",
         {{"get_current_weather", kWeatherArgs, true, "aB3dE6gH9"},
          {"get_local_time", kTimeArgs, true, "Zz9Yy8Xx7"}}});
  // An id the next turn's template would refuse is replaced by a generated one.
  Check(o, "[TOOL_CALLS][{\"name\": \"get_local_time\", \"arguments\": {}, \"id\": \"call_1\"}]",
        {"", "", {{"get_local_time", "{}"}}});
  Check(o, "Checking.[TOOL_CALLS][{\"name\": \"get_local_time\", \"arguments\": {}}]",
        {"Checking.", "", {{"get_local_time", "{}"}}});
  Check(o, "[TOOL_CALLS][{\"name\": \"nope\", \"arguments\": {}}]",
        {"[TOOL_CALLS][{\"name\": \"nope\", \"arguments\": {}}]", "", {}});
}

TEST_CASE("Mistral [TOOL_CALLS]name[ARGS] calls (Small 3.2, Devstral, Ministral)",
          "[assistant_output_parser]") {
  const auto o = Options(ToolCallFormat::kMistralArgs, ReasoningSyntax::kMistralThink);
  Check(o, "[TOOL_CALLS]get_current_weather[ARGS]" + kWeatherArgs,
        {"", "", {{"get_current_weather", kWeatherArgs}}});
  Check(o, "[TOOL_CALLS]get_local_time[CALL_ID]aB3dE6gH9[ARGS]" + kTimeArgs,
        {"", "", {{"get_local_time", kTimeArgs, true, "aB3dE6gH9"}}});
  Check(o,
        "[THINK]Two lookups.[/THINK]On it.[TOOL_CALLS]get_local_time[ARGS]" + kTimeArgs +
            "[TOOL_CALLS]get_current_weather[ARGS]" + kWeatherArgs,
        {"On it.",
         "Two lookups.",
         {{"get_local_time", kTimeArgs}, {"get_current_weather", kWeatherArgs}}});
  Check(o, "[TOOL_CALLS]nope[ARGS]{}", {"[TOOL_CALLS]nope[ARGS]{}", "", {}});
  Check(o, "[TOOL_CALLS]get_local_time[ARGS]{\"timezone\": \"U",
        {"", "", {{"get_local_time", "{\"timezone\": \"U", false}}});
  Check(o, "Brackets [like this] and [TOOL_ stay.",
        {"Brackets [like this] and [TOOL_ stay.", "", {}});
}

TEST_CASE("Phi-4-mini and Nemotron list calls", "[assistant_output_parser]") {
  const std::string list = "[{\"name\": \"get_current_weather\", \"arguments\": " + kWeatherArgs +
                           "}, {\"name\": \"get_local_time\", \"arguments\": " + kTimeArgs + "}]";
  const Want both{"", "", {{"get_current_weather", kWeatherArgs}, {"get_local_time", kTimeArgs}}};
  const auto phi = Options(ToolCallFormat::kPhi4Mini);
  Check(phi, "<|tool_call|>" + list + "<|/tool_call|>", both);
  Check(phi, "<|tool_call|>" + list, both);
  Check(phi, "Sure.<|tool_call|>" + list + "<|/tool_call|> Done.", {"Sure.Done.", "", both.calls});
  const auto nemotron = Options(ToolCallFormat::kNemotronV2, ReasoningSyntax::kThinkTags);
  Check(nemotron, "<think>\nok\n</think>\n<TOOLCALL>" + list + "</TOOLCALL>",
        {"", "ok", both.calls});
}

TEST_CASE("the generic JSON answer", "[assistant_output_parser]") {
  const auto o = Options(ToolCallFormat::kGenericJson);
  Check(o,
        "{\"tool_calls\": [{\"name\": \"get_current_weather\", \"arguments\": " + kWeatherArgs +
            "}, {\"name\": \"get_local_time\", \"arguments\": " + kTimeArgs + "}]}",
        {"", "", {{"get_current_weather", kWeatherArgs}, {"get_local_time", kTimeArgs}}});
  Check(o, "{\"tool_call\": {\"name\": \"get_local_time\", \"arguments\": " + kTimeArgs + "}}",
        {"", "", {{"get_local_time", kTimeArgs}}});
  Check(o, R"({"response": "Hi \"you\"\n\u00e9\ud83d\ude00 \\o/"})",
        {"Hi \"you\"\né😀 \\o/", "", {}});
  Check(o, "Plain text answer.", {"Plain text answer.", "", {}});
  Check(o, "{\"answer\": 42}", {"{\"answer\": 42}", "", {}});
  Check(o, "{\"tool_calls\": [{\"name\": \"nope\", \"arguments\": {}}]}",
        {"{\"tool_calls\": [{\"name\": \"nope\", \"arguments\": {}}]}", "", {}});
  auto thinking = o;
  thinking.reasoning = ReasoningSyntax::kThinkTags;
  Check(thinking, "<think>x</think>\n{\"response\": \"y\"}", {"y", "x", {}});
}

TEST_CASE("random answers of random bytes and markup pieces split anywhere agree",
          "[assistant_output_parser]") {
  // Fragments of every format's markup, shuffled into random answers: whatever the parse
  // decides, splitting must not change it.
  const std::vector<std::string> pieces = {"<tool_call>",
                                           "</tool_call>",
                                           "{\"name\": \"get_local_time\", \"arguments\": ",
                                           "{\"timezone\": \"UTC\"}",
                                           "}",
                                           "]",
                                           "[",
                                           "<think>",
                                           "</think>",
                                           "\n",
                                           " ",
                                           "<",
                                           "[TOOL_CALLS]",
                                           "get_local_time[ARGS]",
                                           "<function=get_local_time>",
                                           "<parameter=timezone>",
                                           "</parameter>",
                                           "</function>",
                                           "<|python_tag|>",
                                           "text",
                                           "\"",
                                           "\\",
                                           ",",
                                           "{\"response\": \"",
                                           "{\"tool_calls\": ["};
  const ToolCallFormat formats[] = {ToolCallFormat::kHermes,      ToolCallFormat::kQwen3CoderXml,
                                    ToolCallFormat::kLlama3Json,  ToolCallFormat::kMistralV3,
                                    ToolCallFormat::kMistralArgs, ToolCallFormat::kPhi4Mini,
                                    ToolCallFormat::kGenericJson};
  std::mt19937 rng(1234);
  for (int round = 0; round < 300; ++round) {
    std::string answer;
    const int n = 1 + rng() % 12;
    for (int i = 0; i < n; ++i) answer += pieces[rng() % pieces.size()];
    const auto o = Options(formats[round % 7], ReasoningSyntax::kThinkTags);
    INFO("answer: " << nlohmann::json(answer).dump() << " format " << ToolCallFormatName(o.format));
    const AssistantMessage whole = AssistantOutputParser::ParseWhole(o, answer);
    for (size_t cut = 1; cut < answer.size(); ++cut) {
      const AssistantMessage split = Parse(o, answer, {cut});
      if (!Same(split, whole))
        FAIL("split at " << cut << ": " << Describe(split) << " vs " << Describe(whole));
    }
    std::vector<size_t> every;
    for (size_t i = 1; i < answer.size(); ++i) every.push_back(i);
    if (!Same(Parse(o, answer, every), whole)) FAIL("byte by byte");
  }
}

TEST_CASE("arguments stream before the call ends", "[assistant_output_parser]") {
  AssistantOutputParser parser(Options(ToolCallFormat::kHermes));
  std::vector<AssistantOutputEvent> events;
  parser.Feed("Hi <tool_", &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].text == "Hi");  // the space and the marker's start are held
  events.clear();
  parser.Feed("call>{\"name\": \"get_local_time\", \"argu", &events);
  CHECK(events.empty());  // the name alone does not begin the call
  parser.Feed("ments\": {\"timezone\": \"Eu", &events);
  REQUIRE(events.size() == 2);
  CHECK(events[0].type == Type::kToolCallBegin);
  CHECK(events[0].name == "get_local_time");
  CHECK(events[1].type == Type::kToolCallArguments);
  CHECK(events[1].text == "{\"timezone\": \"Eu");
  events.clear();
  parser.Feed("rope/Paris\"}}\n</tool_call>", &events);
  REQUIRE(events.size() == 2);
  CHECK(events[0].text == "rope/Paris\"}");
  CHECK(events[1].type == Type::kToolCallEnd);
  CHECK(events[1].complete);
  events.clear();
  parser.Finish(&events);
  CHECK(events.empty());
}

TEST_CASE("generated ids: call_ + 24 alphanumerics, 9 for Mistral, random without a seed",
          "[assistant_output_parser]") {
  auto o = Options(ToolCallFormat::kHermes);
  o.id_seed.reset();
  const std::string answer =
      "<tool_call>{\"name\": \"get_local_time\", \"arguments\": {}}</tool_call>";
  const AssistantMessage a = AssistantOutputParser::ParseWhole(o, answer);
  const AssistantMessage b = AssistantOutputParser::ParseWhole(o, answer);
  REQUIRE(a.tool_calls.size() == 1);
  CHECK(a.tool_calls[0].id != b.tool_calls[0].id);
  const std::string& id = a.tool_calls[0].id;
  CHECK(id.rfind("call_", 0) == 0);
  CHECK(id.size() == 29);
  for (char c : id.substr(5)) CHECK(std::isalnum(static_cast<unsigned char>(c)));
  const AssistantMessage m = AssistantOutputParser::ParseWhole(
      Options(ToolCallFormat::kMistralArgs), "[TOOL_CALLS]get_local_time[ARGS]{}");
  REQUIRE(m.tool_calls.size() == 1);
  CHECK(m.tool_calls[0].id.size() == 9);
  for (char c : m.tool_calls[0].id) CHECK(std::isalnum(static_cast<unsigned char>(c)));
}

}  // namespace assistant_output_parser_test

namespace assistant_output_parser_ws_test {

TEST_CASE("Hermes calls with the whitespace a JSON grammar allows parse as calls",
          "[assistant_output_parser]") {
  AssistantOutputOptions o;
  o.format = ToolCallFormat::kHermes;
  o.tools = *ParseTools(nlohmann::ordered_json::parse(
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
          "properties":{"city":{"type":"string"}}}}}])"));
  o.tool_choice.mode = ToolChoiceMode::kRequired;
  for (const std::string& answer :
       {std::string("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n"
                    "</tool_call>"),
        std::string("<tool_call>\n\n\t\t {\n  \t \"name\"\n\n\t :\n  \"get_weather\", "
                    "\"arguments\": {\"city\": \"x\"}}\n</tool_call>"),
        std::string("<tool_call>\n\n\t\t\t {\n  \"name\":\"get_weather\",\"arguments\":"
                    "{\"city\":\"x\"}}</tool_call>"),
        std::string(
            "<tool_call>{\"name\"\n:\"get_weather\"\n,\n\"arguments\"\n:\n{\"city\":\"x\"}\n}"
            "</tool_call>")}) {
    INFO(answer);
    const AssistantMessage m = AssistantOutputParser::ParseWhole(o, answer);
    REQUIRE(m.tool_calls.size() == 1);
    CHECK(m.tool_calls[0].complete);
    CHECK(m.content.empty());
  }
}

}  // namespace assistant_output_parser_ws_test
}  // namespace textgen
