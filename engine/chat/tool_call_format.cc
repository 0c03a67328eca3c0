#include "engine/chat/tool_call_format.h"

#include <array>
#include <cctype>
#include <utility>

namespace textgen {
namespace {

bool Has(std::string_view source, std::string_view marker) {
  return source.find(marker) != std::string_view::npos;
}

// Native syntaxes this room does not parse, by a marker only their templates carry; checked
// after the supported ones, so the markers need only be distinctive among the rest.
constexpr std::array<std::pair<std::string_view, std::string_view>, 21> kUnsupportedMarkers = {{
    {"<\xEF\xBD\x9C"
     "tool\xE2\x96\x81"
     "calls\xE2\x96\x81"
     "begin\xEF\xBD\x9C>",
     "DeepSeek <\xEF\xBD\x9Ctool\xE2\x96\x81"
     "calls\xE2\x96\x81"
     "begin\xEF\xBD\x9C>"},
    {"DSML", "DeepSeek V3.2+ DSML"},
    {"<|channel|>", "gpt-oss harmony"},
    {"<arg_key>", "GLM 4.5+ <arg_key>"},
    {"<|tool_calls_section_begin|>", "Kimi K2"},
    {"<invoke", "MiniMax <invoke>"},
    {"<tool_calls>", "<tool_calls> list (MiniMax M1, Apriel)"},
    {"<seed:tool_call>", "Seed-OSS"},
    {"<|tool_call_start|>", "LFM2"},
    {"<|tool_call:begin|>", "Solar Open"},
    {"<|tool_call>", "Gemma 4"},
    {"<|tools_prefix|>", "Apertus"},
    {"<function name=", "MiniCPM <function name=>"},
    {"<function=", "Functionary v3.1"},
    {">>>", "Functionary v3.2"},
    {" functools[", "FireFunction v2"},
    {"<|START_ACTION|>", "Command R7B"},
    {"Action:", "Command-R"},
    {"<|tool_call|>", "Granite 3 <|tool_call|>"},
    {"<|start|>assistant to=", "harmony-style recipients"},
    {"function_call", "GigaChat function_call"},
}};

}  // namespace

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kGenericJson:
      return "generic-json";
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kQwen3CoderXml:
      return "qwen3-coder-xml";
    case ToolCallFormat::kLlama3Json:
      return "llama3-json";
    case ToolCallFormat::kMistralV3:
      return "mistral-v3";
    case ToolCallFormat::kMistralArgs:
      return "mistral-args";
    case ToolCallFormat::kPhi4Mini:
      return "phi4-mini";
    case ToolCallFormat::kNemotronV2:
      return "nemotron-v2";
    case ToolCallFormat::kUnsupported:
      return "unsupported";
  }
  return "unsupported";
}

std::string_view ReasoningSyntaxName(ReasoningSyntax syntax) {
  switch (syntax) {
    case ReasoningSyntax::kNone:
      return "none";
    case ReasoningSyntax::kThinkTags:
      return "think-tags";
    case ReasoningSyntax::kMistralThink:
      return "mistral-think";
  }
  return "none";
}

std::string_view ReasoningOpenTag(ReasoningSyntax syntax) {
  switch (syntax) {
    case ReasoningSyntax::kNone:
      return "";
    case ReasoningSyntax::kThinkTags:
      return "<think>";
    case ReasoningSyntax::kMistralThink:
      return "[THINK]";
  }
  return "";
}

std::string_view ReasoningCloseTag(ReasoningSyntax syntax) {
  switch (syntax) {
    case ReasoningSyntax::kNone:
      return "";
    case ReasoningSyntax::kThinkTags:
      return "</think>";
    case ReasoningSyntax::kMistralThink:
      return "[/THINK]";
  }
  return "";
}

ReasoningSyntax DetectReasoningSyntax(std::string_view source) {
  // gpt-oss's harmony "analysis" channel is not a tag pair; its prompt may mention <think>
  // in no template seen, but the check keeps harmony out of the tag modes regardless.
  if (Has(source, "<|channel|>")) return ReasoningSyntax::kNone;
  if (Has(source, "[THINK]") && Has(source, "[/THINK]")) return ReasoningSyntax::kMistralThink;
  if (Has(source, "<think>")) return ReasoningSyntax::kThinkTags;
  return ReasoningSyntax::kNone;
}

DetectedChatSyntax DetectChatSyntax(std::string_view source) {
  DetectedChatSyntax d;
  d.reasoning = DetectReasoningSyntax(source);
  d.renders_tools = Has(source, "tools");
  auto set = [&d](ToolCallFormat format, std::string family) {
    d.tool_format = format;
    d.family = std::move(family);
    return d;
  };
  if (Has(source, "[TOOL_CALLS]")) {
    if (Has(source, "[ARGS]"))
      return set(ToolCallFormat::kMistralArgs, "Mistral [TOOL_CALLS]f[ARGS]");
    return set(ToolCallFormat::kMistralV3, "Mistral v3 [TOOL_CALLS][...]");
  }
  const bool tool_call_tag = Has(source, "<tool_call>") && Has(source, "</tool_call>");
  if (tool_call_tag && Has(source, "<function=") && Has(source, "<parameter=")) {
    return set(ToolCallFormat::kQwen3CoderXml, "Qwen3-Coder XML");
  }
  // Hermes: a JSON object with "name" and "arguments" between the tags. Templates with other
  // bodies inside <tool_call> (GLM's <arg_key>, MiniMax's <invoke>, Apriel's <tool_calls>
  // list) are excluded by their own markers.
  if (tool_call_tag && Has(source, "\"name\"") && Has(source, "arguments") &&
      !Has(source, "<arg_key>") && !Has(source, "<invoke") && !Has(source, "<tool_calls>")) {
    return set(ToolCallFormat::kHermes, "Hermes <tool_call>");
  }
  if (Has(source, "<TOOLCALL>") && Has(source, "</TOOLCALL>")) {
    return set(ToolCallFormat::kNemotronV2, "Nemotron <TOOLCALL>");
  }
  // Phi-4-mini: the tools between <|tool|> and <|/tool|>, calls in <|tool_call|>.
  if (Has(source, "<|tool|>") && Has(source, "<|/tool|>")) {
    return set(ToolCallFormat::kPhi4Mini, "Phi-4-mini <|tool_call|>");
  }
  // Llama 3.1 / 3.2 / 3.3: the ipython role and the "parameters" answer format (Functionary
  // v3.1 shares the header tokens but calls with <function=, checked among the unsupported).
  if (Has(source, "<|start_header_id|>ipython<|end_header_id|>") && Has(source, "\"parameters\"") &&
      !Has(source, "<function=")) {
    return set(ToolCallFormat::kLlama3Json, "Llama 3.x JSON");
  }
  for (const auto& [marker, family] : kUnsupportedMarkers) {
    if (Has(source, marker)) return set(ToolCallFormat::kUnsupported, std::string(family));
  }
  // A template that renders tools or earlier calls in a form not recognised above: guessing
  // would parse the wrong syntax.
  if (Has(source, "tool_calls") || Has(source, "tools")) {
    return set(ToolCallFormat::kUnsupported, "unrecognised tool-call syntax");
  }
  return set(ToolCallFormat::kGenericJson, "none");
}

ToolCallFormat DetectToolCallFormat(std::string_view source) {
  return DetectChatSyntax(source).tool_format;
}

bool PromptOpensReasoning(std::string_view prompt, ReasoningSyntax syntax) {
  const std::string_view open = ReasoningOpenTag(syntax);
  if (open.empty()) return false;
  while (!prompt.empty() && std::isspace(static_cast<unsigned char>(prompt.back()))) {
    prompt.remove_suffix(1);
  }
  return std::string_view(prompt).ends_with(open);
}

bool PromptClosesReasoning(std::string_view prompt, ReasoningSyntax syntax) {
  const std::string_view close = ReasoningCloseTag(syntax);
  if (close.empty()) return false;
  while (!prompt.empty() && std::isspace(static_cast<unsigned char>(prompt.back()))) {
    prompt.remove_suffix(1);
  }
  return prompt.ends_with(close);
}

}  // namespace textgen
