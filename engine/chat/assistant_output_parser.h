// Splits a model's answer into content, reasoning and tool calls, as it streams.
//
// Fed the answer's raw text deltas (control tokens spelled by their token text, as the stream
// assembler renders them: "[TOOL_CALLS]", "<tool_call>", "<think>"), it reports each piece as
// soon as it is certain (assistant_message.h's events); Finish() reports the rest. Feeding the
// answer whole and then calling Finish() is the non-streamed parse: the same code path, and the
// same result however the text is split.
//
// Decisions, documented for the API:
// - Markup never reaches content while a call is possible: text that might begin a marker (a
//   trailing "<tool_" or "[TOOL_") waits until the next bytes decide it, and whitespace right
//   before a call's markup and right after it is dropped.
// - A call begins (kToolCallBegin) once its function name is complete and is one of the
//   offered tools (the named one for ToolChoiceMode::kNamed) and its arguments have started;
//   the arguments then stream byte by byte, always a prefix of valid JSON, whose concatenation
//   is exactly the arguments text. Mistral v3 calls carry their "id" after the arguments, so
//   they are reported when their object closes (keeping the model's id).
// - A botched call, found out before it began (markup opened but then invalid JSON, an unknown
//   function name, arguments that are not an object, the answer ending first), is content,
//   verbatim, markup included: never a half call. After a call began, a byte that breaks its
//   JSON (or the end of the answer) ends it with complete = false; the text from that byte on
//   is content again.
// - With no tools, ToolChoiceMode::kNone or ToolCallFormat::kUnsupported nothing is a call: the
//   answer is content (reasoning is still split off unless ReasoningSyntax::kNone).
// - Reasoning: a block opened at the answer's start (after whitespace), or already open when
//   the prompt opened it (starts_in_reasoning). Its text is trimmed (leading and trailing
//   whitespace dropped) and so is the whitespace between its end and the content.
// - Ids: the model's own (Mistral's 9 characters), else "call_" + 24 random alphanumerics; for
//   the Mistral formats, whose templates require 9 alphanumerics, 9 random alphanumerics (also
//   replacing a model id of another shape).
#ifndef TEXTGEN_ENGINE_CHAT_ASSISTANT_OUTPUT_PARSER_H_
#define TEXTGEN_ENGINE_CHAT_ASSISTANT_OUTPUT_PARSER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/assistant_message.h"
#include "engine/chat/tool_call_format.h"
#include "engine/chat/tool_call_readers.h"
#include "engine/chat/tool_spec.h"

namespace textgen {

struct AssistantOutputOptions {
  ToolCallFormat format = ToolCallFormat::kGenericJson;
  ReasoningSyntax reasoning = ReasoningSyntax::kNone;
  // The prompt ended inside a reasoning block (PromptOpensReasoning).
  bool starts_in_reasoning = false;
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice;
  // Seeds the generated ids (tests); unset: a random seed.
  std::optional<uint64_t> id_seed;
};

// One answer's parser. Not thread-safe; one per generated stream.
class AssistantOutputParser : private CallSink {
 public:
  explicit AssistantOutputParser(AssistantOutputOptions options);
  ~AssistantOutputParser() override;

  // Appends to `events` what `delta` makes certain. Must not be called after Finish().
  void Feed(std::string_view delta, std::vector<AssistantOutputEvent>* events);
  // The answer ended: appends everything still held back.
  void Finish(std::vector<AssistantOutputEvent>* events);

  // Feeds `answer` whole and finishes: the non-streamed parse.
  static AssistantMessage ParseWhole(AssistantOutputOptions options, std::string_view answer);

 private:
  enum class State { kAnswerStart, kReasoning, kContent, kBlock, kAfterCall };

  void Run();
  bool StepAnswerStart();
  bool StepReasoning();
  bool StepContent();
  bool StepBlock();
  bool StepAfterCall();

  void StartBlock(std::string_view marker, std::unique_ptr<BlockReader> reader);
  void EndBlock(bool failed);
  std::unique_ptr<BlockReader> ReaderForMarker(std::string_view marker) const;
  std::string NewId();

  void EmitContent(std::string_view text);
  void EmitReasoning(std::string_view text);
  void Emit(AssistantOutputEvent::Type type, std::string_view text, int index = -1);

  // CallSink
  bool BeginCall(const std::string& name, const std::string& id) override;
  void Arguments(std::string_view fragment) override;
  void EndCall(bool complete) override;
  void Content(std::string_view text) override;

  AssistantOutputOptions options_;
  bool tools_active_ = false;
  std::vector<std::string_view> markers_;  // start markers anywhere in content
  bool json_at_start_ = false;             // '{' at the answer's start opens a block
  std::string_view close_marker_;          // swallowed after a block
  std::string_view think_open_, think_close_;

  State state_ = State::kAnswerStart;
  bool eof_ = false;
  std::string buf_;         // input not yet consumed
  std::string content_ws_;  // trailing whitespace of the content, held
  std::string reasoning_ws_;
  bool content_started_ = false;    // non-whitespace content was emitted
  bool reasoning_started_ = false;  // non-whitespace reasoning was emitted
  bool skip_ws_ = false;            // drop whitespace before the next content

  std::unique_ptr<BlockReader> reader_;
  std::string raw_;  // the block's bytes that are not yet part of a call (released if botched)
  bool block_committed_ = false;
  int next_index_ = 0;

  std::mt19937_64 rng_;
  std::vector<AssistantOutputEvent>* out_ = nullptr;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_CHAT_ASSISTANT_OUTPUT_PARSER_H_
