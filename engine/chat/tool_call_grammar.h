// GBNF grammars (engine/grammar's llama.cpp syntax) that make a model write a valid tool call
// in its family's syntax (tool_call_format.h), with arguments valid under each tool's
// `parameters` schema (JsonSchemaToGbnfRules, one rule set per tool).
//
// - tool_choice "required" or a named function: ToolCallGrammar, applied from the answer's
//   first token; only calls (several with parallel_tool_calls, else one; exactly one call of
//   the named function), optionally preceded by a reasoning block, then the end.
// - tool_choice "auto": AutoToolCallGrammar, a lazy grammar (as llama.cpp's): the model writes
//   freely until a trigger appears, and from the trigger's first byte on the grammar applies
//   (the trigger included), so a call, once started, is valid. kGenericJson has no trigger: its
//   grammar (calls or {"response": "..."}) applies from the start.
//
// Choices the grammar makes where the parser (assistant_output_parser.h) is more lenient:
// call objects list "name" first, then the arguments (then Mistral v3's 9-character "id");
// Llama 3.x gets one call (its templates refuse several in the history); Qwen3-Coder's XML
// writes the declared parameters in the schema's order (required ones always, optional ones
// skippable; undeclared ones never), text values for "string" parameters and JSON for others;
// Mistral's [CALL_ID] is optional.
#ifndef TEXTGEN_ENGINE_CHAT_TOOL_CALL_GRAMMAR_H_
#define TEXTGEN_ENGINE_CHAT_TOOL_CALL_GRAMMAR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/chat/tool_call_format.h"
#include "engine/chat/tool_spec.h"
#include "engine/grammar/json_schema.h"
#include "nlohmann/json.hpp"

namespace textgen {

struct ToolCallGrammarOptions {
  bool parallel_tool_calls = true;
  // A reasoning block the model may write before its calls; with starts_in_reasoning the
  // answer starts inside it (PromptOpensReasoning), so it must be closed first.
  ReasoningSyntax reasoning = ReasoningSyntax::kNone;
  bool starts_in_reasoning = false;
  // Markup that is one control token of the model's vocabulary (text -> id, e.g.
  // "[TOOL_CALLS]" -> 5): written as the token element <[id]>, since a control token is not
  // matched by its text. Other markup is a text literal. ToolCallMarkers lists what to look up.
  absl::flat_hash_map<std::string, int32_t> marker_tokens;
  JsonSchemaOptions schema;
};

// The markup texts a format's grammar writes (call markers, reasoning tags): the ones to look
// up in the vocabulary for ToolCallGrammarOptions::marker_tokens.
std::vector<std::string> ToolCallMarkers(ToolCallFormat format, ReasoningSyntax reasoning);

// tool_choice "required" or named (ToolChoiceMode::kRequired / kNamed). InvalidArgument for
// another mode, kUnsupported, invalid tools (ParseTools' field paths) and for a parameters
// schema the converter refuses: "tools[2].function.parameters: " + its message (keyword and
// JSON pointer).
// `tools` as ordered_json keeps the client's property order (nlohmann::json sorts keys, and
// the grammar then writes arguments in alphabetical order).
absl::StatusOr<std::string> ToolCallGrammar(ToolCallFormat format,
                                            const nlohmann::ordered_json& tools,
                                            const ToolChoice& choice,
                                            const ToolCallGrammarOptions& options);
absl::StatusOr<std::string> ToolCallGrammar(ToolCallFormat format, const nlohmann::json& tools,
                                            const ToolChoice& choice,
                                            const ToolCallGrammarOptions& options);
absl::StatusOr<std::string> ToolCallGrammar(ToolCallFormat format, const nlohmann::json& tools,
                                            const ToolChoice& choice, bool parallel_tool_calls);

// Where a lazy grammar starts applying.
struct GrammarTrigger {
  enum class Type {
    kToken,    // the control token `token` (its text is `text`) anywhere in the answer
    kWord,     // `text` anywhere in the answer (however it is tokenized)
    kAtStart,  // `text` at the answer's start, after whitespace (and after reasoning)
  };
  Type type = Type::kWord;
  std::string text;
  int32_t token = -1;
};

struct AutoToolCallGrammar {
  std::string gbnf;
  // Empty when the grammar applies from the start (lazy false: kGenericJson).
  std::vector<GrammarTrigger> triggers;
  bool lazy = true;
};

// tool_choice "auto". Triggers are meant outside reasoning: a reasoning block may mention the
// markup (the decoder arms them once the block has closed). Errors as ToolCallGrammar.
absl::StatusOr<AutoToolCallGrammar> AutoToolCallGrammarFor(ToolCallFormat format,
                                                           const nlohmann::ordered_json& tools,
                                                           const ToolCallGrammarOptions& options);
absl::StatusOr<AutoToolCallGrammar> AutoToolCallGrammarFor(ToolCallFormat format,
                                                           const nlohmann::json& tools,
                                                           const ToolCallGrammarOptions& options);

// For kGenericJson (templates that do not render tools): the text to add to the system prompt
// that describes the tools and the answer's JSON shape, the one the grammar and the parser
// expect ({"tool_calls": [...]} or, without parallel calls, {"tool_call": {...}}; or
// {"response": "..."}).
std::string GenericToolSystemPrompt(const std::vector<ToolSpec>& tools, bool parallel_tool_calls);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_CHAT_TOOL_CALL_GRAMMAR_H_
