// Recognising each family's tool-call and reasoning syntax from its template, over the 72
// shared templates; the tools and tool_choice validation.
#include "engine/chat/tool_call_format.h"

#include <dirent.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "engine/chat/tool_spec.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace textgen {
namespace tool_call_format_test {

struct Expected {
  ToolCallFormat format;
  ReasoningSyntax reasoning;
};

constexpr auto kGeneric = ToolCallFormat::kGenericJson;
constexpr auto kHermes = ToolCallFormat::kHermes;
constexpr auto kXml = ToolCallFormat::kQwen3CoderXml;
constexpr auto kLlama = ToolCallFormat::kLlama3Json;
constexpr auto kMistralV3 = ToolCallFormat::kMistralV3;
constexpr auto kMistralArgs = ToolCallFormat::kMistralArgs;
constexpr auto kNemotron = ToolCallFormat::kNemotronV2;
constexpr auto kNo = ToolCallFormat::kUnsupported;
constexpr auto kNone = ReasoningSyntax::kNone;
constexpr auto kThink = ReasoningSyntax::kThinkTags;
constexpr auto kMThink = ReasoningSyntax::kMistralThink;

// Every template of the shared set, with the syntax its model writes (read from what each
// template renders for tool calls and reasoning).
const std::map<std::string, Expected>& Table() {
  static const auto* table = new std::map<std::string, Expected>{
      {"Apertus-8B-Instruct", {kNo, kNone}},           // <|tools_prefix|>[{"f": {...}}]
      {"Apriel-1.6-15b-Thinker-fixed", {kNo, kNone}},  // <tool_calls>[...]
      {"Bielik-11B-v3.0-Instruct", {kHermes, kThink}},
      {"ByteDance-Seed-OSS", {kNo, kNone}},  // <seed:tool_call>, <seed:think>
      {"Cohere2MoE", {kNo, kNone}},
      {"CohereForAI-c4ai-command-r-plus-tool_use", {kNo, kNone}},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", {kNo, kNone}},
      {"DeepSeek-V3-lenml", {kNo, kNone}},
      {"GLM-4.6", {kNo, kThink}},  // <tool_call>f<arg_key>
      {"GLM-4.7-Flash", {kNo, kThink}},
      {"GigaChat3-10B-A1.8B", {kNo, kNone}},
      {"GigaChat3.1-10B-A1.8B", {kNo, kNone}},
      {"HuggingFaceTB-SmolLM3-3B", {kGeneric, kThink}},
      {"Kimi-K2-Instruct", {kNo, kNone}},
      {"Kimi-K2-Thinking", {kNo, kThink}},
      {"Kimi-K3", {kNo, kNone}},
      {"LFM2-8B-A1B", {kNo, kNone}},
      {"LFM2.5-8B-A1B", {kNo, kThink}},
      {"LFM2.5-Instruct", {kNo, kNone}},
      {"Llama-3.1-lenml", {kGeneric, kNone}},  // no tools in this copy of the template
      {"MiMo-VL", {kHermes, kNone}},
      {"MiniMax-M1", {kNo, kNone}},
      {"MiniMax-M2", {kNo, kThink}},
      {"MiniMax-M3", {kNo, kNone}},
      {"Mistral-Small-3.2-24B-Instruct-2506", {kMistralArgs, kNone}},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", {kXml, kThink}},
      {"NVIDIA-Nemotron-Nano-v2", {kNemotron, kThink}},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", {kHermes, kNone}},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", {kHermes, kNone}},
      {"Qwen-QwQ-32B", {kHermes, kThink}},
      {"Qwen-Qwen2.5-7B-Instruct", {kHermes, kNone}},
      {"Qwen-Qwen3-0.6B", {kHermes, kThink}},
      {"Qwen3-Coder", {kXml, kNone}},
      {"Qwen3-lenml", {kHermes, kThink}},
      {"Qwen3.5-4B", {kXml, kThink}},
      {"Reka-Edge", {kHermes, kThink}},
      {"StepFun3.5-Flash", {kXml, kThink}},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", {kNo, kThink}},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", {kNo, kThink}},
      {"deepseek-ai-DeepSeek-V3.1", {kNo, kThink}},
      {"deepseek-ai-DeepSeek-V3.2", {kNo, kThink}},
      {"deepseek-ai-DeepSeek-V4-Flash-0731", {kNo, kThink}},
      {"deepseek-ai-DeepSeek-V4", {kNo, kThink}},
      {"fireworks-ai-llama-3-firefunction-v2", {kNo, kNone}},
      {"gemma-3-lenml", {kGeneric, kNone}},
      {"google-gemma-2-2b-it", {kGeneric, kNone}},
      {"google-gemma-4-31B-it-interleaved", {kNo, kNone}},
      {"google-gemma-4-31B-it", {kNo, kNone}},
      {"ibm-granite-granite-3.3-2B-Instruct", {kNo, kThink}},
      {"ibm-granite-granite-4.0", {kHermes, kNone}},
      {"ibm-granite-granite-4.1", {kHermes, kNone}},
      {"llama-cpp-deepseek-r1", {kNo, kThink}},
      {"llama-cpp-rwkv-world", {kGeneric, kThink}},
      {"meetkai-functionary-medium-v3.1", {kNo, kNone}},
      {"meetkai-functionary-medium-v3.2", {kNo, kNone}},
      {"meta-llama-Llama-3.1-8B-Instruct", {kLlama, kNone}},
      {"meta-llama-Llama-3.2-3B-Instruct", {kLlama, kNone}},
      {"meta-llama-Llama-3.3-70B-Instruct", {kLlama, kNone}},
      {"microsoft-Phi-3.5-mini-instruct", {kGeneric, kNone}},
      {"mistralai-Ministral-3-14B-Reasoning-2512", {kMistralArgs, kMThink}},
      {"mistralai-Mistral-Nemo-Instruct-2407", {kMistralV3, kNone}},
      {"moonshotai-Kimi-K2", {kNo, kNone}},
      {"muse-glimmer", {kNo, kNone}},
      {"openai-gpt-oss-120b", {kNo, kNone}},
      {"openbmb-MiniCPM5-1B", {kNo, kThink}},
      {"poolside-Laguna-S-2.1", {kNo, kThink}},
      {"poolside-Laguna-XS-2.1", {kNo, kThink}},
      {"poolside-Laguna-XS.2", {kNo, kThink}},
      {"tencent-Hy3", {kNo, kNone}},
      {"unsloth-Apriel-1.5", {kNo, kNone}},
      {"unsloth-mistral-Devstral-Small-2507", {kMistralArgs, kNone}},
      {"upstage-Solar-Open-100B", {kNo, kNone}},
  };
  return *table;
}

std::set<std::string> TemplateStems() {
  std::set<std::string> stems;
  const std::string dir = testing::ChatTemplatesDir() + "/templates";
  DIR* d = opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const std::string ext = ".jinja";
    if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
      stems.insert(name.substr(0, name.size() - ext.size()));
    }
  }
  closedir(d);
  return stems;
}

// Phi-4-mini-instruct's published template (not in the shared set): tools in the system
// message between <|tool|> and <|/tool|>.
constexpr char kPhi4MiniTemplate[] =
    "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and "
    "message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + "
    "'<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + "
    "message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if "
    "add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}";

TEST_CASE("every shared template's tool-call and reasoning syntax is recognised",
          "[tool_call_format]") {
  const std::set<std::string> stems = TemplateStems();
  CHECK(stems.size() == 72);
  std::string failures;
  std::map<ToolCallFormat, int> per_format;
  for (const std::string& stem : stems) {
    const auto it = Table().find(stem);
    if (it == Table().end()) {
      failures += "  " + stem + ": not in the table\n";
      continue;
    }
    const std::string source =
        testing::ReadFile(testing::ChatTemplatesDir() + "/templates/" + stem + ".jinja");
    const DetectedChatSyntax got = DetectChatSyntax(source);
    ++per_format[got.tool_format];
    if (got.tool_format != it->second.format || got.reasoning != it->second.reasoning) {
      failures += "  " + stem + ": got " + std::string(ToolCallFormatName(got.tool_format)) + " (" +
                  got.family + ") / " + std::string(ReasoningSyntaxName(got.reasoning)) +
                  ", want " + std::string(ToolCallFormatName(it->second.format)) + " / " +
                  std::string(ReasoningSyntaxName(it->second.reasoning)) + "\n";
    }
    CHECK(DetectToolCallFormat(source) == got.tool_format);
    CHECK(DetectReasoningSyntax(source) == got.reasoning);
    CHECK(!got.family.empty());
  }
  INFO(failures);
  CHECK(failures.empty());
  CHECK(Table().size() == stems.size());
  CHECK(per_format[kHermes] == 11);
  CHECK(per_format[kXml] == 4);
  CHECK(per_format[kLlama] == 3);
  CHECK(per_format[kMistralArgs] == 3);
  CHECK(per_format[kMistralV3] == 1);
  CHECK(per_format[kNemotron] == 1);
}

TEST_CASE("Phi-4-mini's template is recognised, and a plain template is generic",
          "[tool_call_format]") {
  const DetectedChatSyntax phi = DetectChatSyntax(kPhi4MiniTemplate);
  CHECK(phi.tool_format == ToolCallFormat::kPhi4Mini);
  CHECK(phi.reasoning == ReasoningSyntax::kNone);
  const DetectedChatSyntax plain = DetectChatSyntax(
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>");
  CHECK(plain.tool_format == ToolCallFormat::kGenericJson);
  CHECK_FALSE(plain.renders_tools);
  CHECK(plain.family == "none");
  CHECK(DetectChatSyntax("").tool_format == ToolCallFormat::kGenericJson);
}

TEST_CASE("the answer starts inside a reasoning block when the prompt opened it",
          "[tool_call_format]") {
  // The generation prompts of 01-system-user as rendered by jinja2: these open the block
  // (DeepSeek-R1's "<think>\n", GLM's "<think>"); the others leave it to the model or render
  // it closed (this R1-Distill-Qwen copy closes it unless enable_thinking is passed).
  const std::set<std::string> opening = {"GLM-4.7-Flash",
                                         "MiniMax-M2",
                                         "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
                                         "NVIDIA-Nemotron-Nano-v2",
                                         "Qwen3.5-4B",
                                         "StepFun3.5-Flash",
                                         "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
                                         "llama-cpp-deepseek-r1",
                                         "poolside-Laguna-S-2.1"};
  int checked = 0;
  for (const std::string& stem : TemplateStems()) {
    const std::string path =
        testing::ChatTemplatesDir() + "/expected/" + stem + "/01-system-user.agp-true.txt";
    if (FILE* f = fopen(path.c_str(), "rb")) {
      fclose(f);
    } else {
      continue;  // the template raised on this conversation
    }
    const ReasoningSyntax syntax = Table().at(stem).reasoning;
    INFO(stem);
    CHECK(PromptOpensReasoning(testing::ReadFile(path), syntax) == opening.count(stem) > 0);
    ++checked;
  }
  CHECK(checked > 60);
  CHECK(PromptOpensReasoning("<|im_start|>assistant\n<think>\n", ReasoningSyntax::kThinkTags));
  // Qwen3 with enable_thinking false renders an empty, closed block.
  CHECK_FALSE(PromptOpensReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n",
                                   ReasoningSyntax::kThinkTags));
  CHECK(PromptOpensReasoning("[INST]hi[/INST][THINK]", ReasoningSyntax::kMistralThink));
  CHECK_FALSE(PromptOpensReasoning("<think>\n", ReasoningSyntax::kNone));
  CHECK_FALSE(PromptOpensReasoning("", ReasoningSyntax::kThinkTags));
  CHECK(PromptClosesReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n",
                              ReasoningSyntax::kThinkTags));
  CHECK(PromptClosesReasoning("[INST]hi[/INST][THINK]x[/THINK]", ReasoningSyntax::kMistralThink));
  CHECK_FALSE(
      PromptClosesReasoning("<|im_start|>assistant\n<think>\n", ReasoningSyntax::kThinkTags));
  CHECK_FALSE(
      PromptClosesReasoning("</think>x<|im_start|>assistant\n", ReasoningSyntax::kThinkTags));
  CHECK_FALSE(PromptClosesReasoning("</think>\n", ReasoningSyntax::kNone));
}

nlohmann::json Tool(const std::string& name) {
  return {{"type", "function"},
          {"function",
           {{"name", name},
            {"parameters", {{"type", "object"}, {"properties", nlohmann::json::object()}}}}}};
}

std::string ErrorOf(const nlohmann::json& tools) {
  const auto got = ParseTools(tools);
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(got.status().message());
}

std::string ErrorOfList(const std::vector<nlohmann::json>& items) {
  return ErrorOf(nlohmann::json(items));
}

TEST_CASE("tools are validated with the failing field's path", "[tool_call_format]") {
  const auto ok = ParseTools(nlohmann::json::array({Tool("get_weather"), Tool("a-b_9")}));
  REQUIRE(ok.ok());
  REQUIRE(ok->size() == 2);
  CHECK((*ok)[0].name == "get_weather");
  nlohmann::json no_params = Tool("f");
  no_params["function"].erase("parameters");
  const auto defaulted = ParseTools(nlohmann::json::array({no_params}));
  REQUIRE(defaulted.ok());
  CHECK((*defaulted)[0].parameters["type"] == "object");

  CHECK(ErrorOf(nlohmann::json::object()) == "tools: must be an array");
  CHECK(ErrorOfList({Tool("a"), 3}) == "tools[1]: must be an object");
  nlohmann::json bad_type = Tool("a");
  bad_type["type"] = "retrieval";
  CHECK(ErrorOfList({bad_type}) == "tools[0].type: must be \"function\"");
  CHECK(ErrorOfList({Tool("a"), Tool("b"), Tool("has space")})
            .starts_with("tools[2].function.name: \"has space\" must match"));
  CHECK(ErrorOfList({Tool(std::string(65, 'x'))}).starts_with("tools[0].function.name:"));
  CHECK(ErrorOfList({Tool("")}).starts_with("tools[0].function.name:"));
  CHECK(ErrorOfList({Tool("a"), Tool("a")}) ==
        "tools[1].function.name: \"a\" names an earlier tool too");
  nlohmann::json bad_params = Tool("a");
  bad_params["function"]["parameters"] = "object";
  CHECK(ErrorOfList({bad_params}) == "tools[0].function.parameters: must be a JSON Schema object");
  nlohmann::json bad_desc = Tool("a");
  bad_desc["function"]["description"] = 5;
  CHECK(ErrorOfList({bad_desc}) == "tools[0].function.description: must be a string");
  nlohmann::json no_function = Tool("a");
  no_function.erase("function");
  CHECK(ErrorOfList({no_function}) == "tools[0].function: must be an object");
  CHECK(IsValidToolName(std::string(64, 'a')));
  CHECK_FALSE(IsValidToolName("a.b"));
}

TEST_CASE("tool_choice is validated against the tools", "[tool_call_format]") {
  const std::vector<ToolSpec> tools = *ParseTools(nlohmann::json::array({Tool("get_weather")}));
  CHECK(ParseToolChoice(nullptr, tools)->mode == ToolChoiceMode::kAuto);
  CHECK(ParseToolChoice(nullptr, {})->mode == ToolChoiceMode::kNone);
  CHECK(ParseToolChoice("none", tools)->mode == ToolChoiceMode::kNone);
  CHECK(ParseToolChoice("required", tools)->mode == ToolChoiceMode::kRequired);
  const auto named =
      ParseToolChoice({{"type", "function"}, {"function", {{"name", "get_weather"}}}}, tools);
  REQUIRE(named.ok());
  CHECK(named->mode == ToolChoiceMode::kNamed);
  CHECK(named->function_name == "get_weather");
  auto error = [&](const nlohmann::json& c, const std::vector<ToolSpec>& t) {
    const auto got = ParseToolChoice(c, t);
    REQUIRE_FALSE(got.ok());
    return std::string(got.status().message());
  };
  CHECK(error("sometimes", tools).starts_with("tool_choice: \"sometimes\""));
  CHECK(error("required", {}) == "tool_choice: \"required\" needs tools");
  CHECK(error({{"type", "function"}, {"function", {{"name", "other"}}}}, tools) ==
        "tool_choice.function.name: \"other\" is not one of the tools");
  CHECK(error({{"type", "function"}}, tools) == "tool_choice.function: must be an object");
  CHECK(error({{"type", "tool"}}, tools) == "tool_choice.type: must be \"function\"");
  CHECK(error(3, tools).starts_with("tool_choice: must be"));
}

}  // namespace tool_call_format_test
}  // namespace textgen
