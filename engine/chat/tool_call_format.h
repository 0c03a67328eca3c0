// Model families' tool-call and reasoning syntax, recognised from the chat template's source.
//
// A chat template teaches the model how to call tools (it renders the tools and earlier calls
// in the family's syntax); the answer is then parsed (assistant_output_parser.h) and, when a
// call is forced, constrained (tool_call_grammar.h) in the same syntax. The syntaxes handled:
//
//   kHermes         <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>  (repeated
//                   for parallel calls; content may come before and after). Qwen2.5, Qwen3,
//                   QwQ, Hermes 2 Pro / 3, Granite 4, MiMo-VL, Reka, Bielik.
//   kQwen3CoderXml  <tool_call>\n<function=f>\n<parameter=x>\nvalue\n</parameter>\n</function>
//                   \n</tool_call>; a value is text (a string parameter) or JSON (others).
//                   Qwen3-Coder, Qwen3.5, Nemotron 3 Nano, StepFun 3.5.
//   kLlama3Json     {"name": "f", "parameters": {...}} as the whole answer (several separated
//                   by ';'), or after <|python_tag|>; also <|python_tag|>tool.call(k="v") for
//                   Llama 3.1's built-in tools and raw code for a "python" tool.
//   kMistralV3      [TOOL_CALLS] [{"name": "f", "arguments": {...}, "id": "abcDEF123"}, ...]
//                   (Mistral Nemo).
//   kMistralArgs    [TOOL_CALLS]f[ARGS]{...}, optionally [TOOL_CALLS]f[CALL_ID]abcDEF123[ARGS]
//                   {...}, repeated for parallel calls (Mistral Small 3.2, Devstral, Ministral).
//   kPhi4Mini       <|tool_call|>[{"name": "f", "arguments": {...}}, ...]<|/tool_call|>
//                   (Phi-4-mini's documented form; no such template in the shared set).
//   kNemotronV2     <TOOLCALL>[{"name": "f", "arguments": {...}}, ...]</TOOLCALL>
//   kGenericJson    no native syntax: the whole answer is one JSON object,
//                   {"tool_calls": [{"name": "f", "arguments": {...}}, ...]} (or, with
//                   parallel calls off, {"tool_call": {"name": "f", "arguments": {...}}}) or
//                   {"response": "the answer as text"}. The server describes the tools and this
//                   shape in the system prompt (the template does not render tools).
//   kUnsupported    the template teaches a native syntax not handled here (GLM's <arg_key>,
//                   DeepSeek's <｜tool▁calls▁begin｜>, Kimi, MiniMax, Functionary, Command-R,
//                   gpt-oss's harmony, Gemma 4, Apertus, ...): tools cannot be offered to this
//                   model (DetectedChatSyntax::family names it for the error).
//
// Reasoning ("thinking") blocks: <think>...</think> (Qwen3, QwQ, DeepSeek-R1 and its
// distills, GLM, SmolLM3, ...) and [THINK]...[/THINK] (Ministral / Magistral). gpt-oss's
// harmony channels are not handled (its reasoning arrives as content).
#ifndef TEXTGEN_ENGINE_CHAT_TOOL_CALL_FORMAT_H_
#define TEXTGEN_ENGINE_CHAT_TOOL_CALL_FORMAT_H_

#include <string>
#include <string_view>

namespace textgen {

enum class ToolCallFormat {
  kGenericJson,
  kHermes,
  kQwen3CoderXml,
  kLlama3Json,
  kMistralV3,
  kMistralArgs,
  kPhi4Mini,
  kNemotronV2,
  kUnsupported,
};

enum class ReasoningSyntax {
  kNone,          // no reasoning block: everything is content ("reasoning format none")
  kThinkTags,     // <think> ... </think>
  kMistralThink,  // [THINK] ... [/THINK]
};

// "hermes", "qwen3-coder-xml", "llama3-json", "mistral-v3", "mistral-args", "phi4-mini",
// "nemotron-v2", "generic-json", "unsupported".
std::string_view ToolCallFormatName(ToolCallFormat format);
std::string_view ReasoningSyntaxName(ReasoningSyntax syntax);

struct DetectedChatSyntax {
  ToolCallFormat tool_format = ToolCallFormat::kGenericJson;
  ReasoningSyntax reasoning = ReasoningSyntax::kNone;
  // The family recognised, for logs and errors ("Qwen3-Coder XML", "GLM 4.5+ <arg_key>", ...);
  // "none" when the template shows no tool-call syntax.
  std::string family;
  // Whether the template reads the `tools` variable (renders the tools itself). When false,
  // the server describes the tools in the system prompt (kGenericJson's case).
  bool renders_tools = false;
};

// Recognises the template's syntax from markers in its source (what it renders for tools,
// earlier calls and reasoning). Never fails: a template with no tool syntax is kGenericJson.
DetectedChatSyntax DetectChatSyntax(std::string_view template_source);
ToolCallFormat DetectToolCallFormat(std::string_view template_source);
ReasoningSyntax DetectReasoningSyntax(std::string_view template_source);

// The block's opening and closing tags ("<think>", "</think>"); empty for kNone.
std::string_view ReasoningOpenTag(ReasoningSyntax syntax);
std::string_view ReasoningCloseTag(ReasoningSyntax syntax);

// Whether the answer starts inside a reasoning block: the rendered prompt (generation prompt
// included) ends with the block's opening tag, up to whitespace, as DeepSeek-R1's distills'
// prompts end with "<think>\n". A prompt that closes the block (Qwen3 with enable_thinking
// false renders "<think>\n\n</think>\n\n") or never opens it gives false.
bool PromptOpensReasoning(std::string_view rendered_prompt, ReasoningSyntax syntax);

// Whether the rendered prompt ends with the block's closing tag, up to whitespace (Qwen3 with
// enable_thinking false renders "<think>\n\n</think>\n\n"): the answer is after the block, and
// a thinking model must not open another.
bool PromptClosesReasoning(std::string_view rendered_prompt, ReasoningSyntax syntax);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_CHAT_TOOL_CALL_FORMAT_H_
