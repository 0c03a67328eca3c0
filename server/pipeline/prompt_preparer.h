// The pipeline's prompt preparer. For chats: renders a ChatTurn with the model's template (tools
// included, in the family's own way), tokenizes it, and builds what decoding and the stream
// assembler need to honour the turn: the output constraint (a forced or triggered tool-call
// grammar, a response_format grammar, the reasoning gate and budget), the control tokens the
// answer's text must show, and how to parse the answer. For plain prompts: the output format's
// constraint. Runs on the prompt workers (rendering and compiling a grammar take milliseconds).
#ifndef TEXTGEN_SERVER_PIPELINE_PROMPT_PREPARER_H_
#define TEXTGEN_SERVER_PIPELINE_PROMPT_PREPARER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/chat/assistant_output_parser.h"
#include "engine/chat/model_chat_template.h"
#include "engine/chat/tool_call_format.h"
#include "engine/constraint/reasoning_gate.h"
#include "engine/decoding/token_constraint.h"
#include "engine/grammar/grammar_vocab.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/pipeline/chat_turn.h"

namespace textgen::server {

// How to read one answer of a prepared chat (one parser per choice).
struct AnswerPlan {
  // False: the answer is passed through as text (no tools, reasoning kept raw or no syntax).
  bool parse = false;
  AssistantOutputOptions options;
};

struct PreparedChat {
  std::vector<int32_t> prompt;
  // Unset: free text.
  TokenConstraintFactory constraint;
  std::vector<int32_t> shown_special_tokens;
  AnswerPlan answer;
};

struct PromptPreparerOptions {
  // Most reasoning tokens when a turn gives none (unset: no limit).
  std::optional<int> default_reasoning_budget;
  // When a turn does not say.
  ReasoningFormat default_reasoning_format = ReasoningFormat::kSeparate;
};

// Immutable; Prepare is safe to call concurrently.
class PromptPreparer {
 public:
  // `chat_template`: the model's (or --chat-template's), or why there is none: every Prepare
  // then fails with FailedPrecondition carrying that message. Borrows `tokenizer`.
  PromptPreparer(absl::StatusOr<ModelChatTemplate> chat_template, const Tokenizer& tokenizer,
                 PromptPreparerOptions options = {});

  // InvalidArgument naming the field for what cannot be honoured: tools for a template whose
  // tool-call syntax is not handled, response_format with a forced tool call, a schema or
  // grammar that cannot be enforced (keyword and JSON pointer, or line:column), a template that
  // raises (its message), an empty rendering.
  absl::StatusOr<PreparedChat> Prepare(const ChatTurn& turn) const;

  // The rendered prompt's token ids only (Anthropic's count_tokens).
  absl::StatusOr<std::vector<int32_t>> PromptIds(const ChatTurn& turn) const;

  // A plain prompt's constraint for `format` (unset for kText); errors as Prepare's.
  absl::StatusOr<TokenConstraintFactory> OutputConstraint(const OutputFormat& format) const;

  const DetectedChatSyntax& syntax() const { return syntax_; }
  bool has_template() const { return template_.ok(); }

 private:
  // The template's input for `turn` (tools rendered by the template or, for templates that do
  // not render them, described in the system message).
  absl::StatusOr<ChatTemplateInput> TemplateInput(const ChatTurn& turn, bool tools_active) const;
  absl::StatusOr<TokenConstraintFactory> Constraint(const ChatTurn& turn, bool tools_active,
                                                    ReasoningGate::Start reasoning_start,
                                                    std::vector<int32_t>* shown) const;

  absl::StatusOr<ModelChatTemplate> template_;
  const Tokenizer& tokenizer_;
  PromptPreparerOptions options_;
  DetectedChatSyntax syntax_;
  std::shared_ptr<const GrammarVocab> vocab_;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_PIPELINE_PROMPT_PREPARER_H_
