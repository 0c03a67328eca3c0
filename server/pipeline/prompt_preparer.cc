#include "server/pipeline/prompt_preparer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/chat/tool_call_grammar.h"
#include "engine/constraint/grammar_constraint.h"
#include "engine/constraint/reasoning_gate.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/util/status_macros.h"
#include "server/pipeline/tool_prompt.h"

namespace textgen::server {
namespace {

using json = nlohmann::ordered_json;

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompileFor(
    const std::string& gbnf, const std::shared_ptr<const GrammarVocab>& vocab,
    const std::string& field) {
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> g =
      CompiledGrammar::GetOrCompile(gbnf, "root", vocab);
  if (!g.ok())
    return absl::Status(g.status().code(), absl::StrCat(field, ": ", g.status().message()));
  return *std::move(g);
}

// The id of the control token spelled exactly `text`, or -1.
int32_t ControlToken(const Tokenizer& tok, std::string_view text) {
  const int32_t id = tok.TokenToId(text);
  return id >= 0 && tok.IsControl(id) ? id : -1;
}

}  // namespace

PromptPreparer::PromptPreparer(absl::StatusOr<ModelChatTemplate> chat_template,
                               const Tokenizer& tokenizer, PromptPreparerOptions options)
    : template_(std::move(chat_template)), tokenizer_(tokenizer), options_(options) {
  if (template_.ok()) syntax_ = DetectChatSyntax(template_->chat_template.source());
  vocab_ = GrammarVocab::Create(tokenizer_);
}

absl::StatusOr<ChatTemplateInput> PromptPreparer::TemplateInput(const ChatTurn& turn,
                                                                bool tools_active) const {
  ChatTemplateInput input;
  input.messages = turn.messages;
  input.add_generation_prompt = turn.add_generation_prompt;
  input.kwargs = turn.template_kwargs;
  if (!tools_active) return input;
  if (syntax_.renders_tools) {
    input.tools = ToolsAsOpenAiJson(turn.tools);
  } else {
    // The template does not render tools: they and the answer's JSON shape go into the system
    // message (kGenericJson).
    AddToolsToSystemMessage(turn.tools, turn.parallel_tool_calls, &input.messages);
  }
  return input;
}

absl::StatusOr<std::vector<int32_t>> PromptPreparer::PromptIds(const ChatTurn& turn) const {
  if (!template_.ok()) return absl::FailedPreconditionError(template_.status().message());
  const bool tools_active = !turn.tools.empty() && turn.tool_choice.mode != ToolChoiceMode::kNone;
  TG_ASSIGN_OR_RETURN(ChatTemplateInput input, TemplateInput(turn, tools_active));
  TG_ASSIGN_OR_RETURN(std::string rendered, RenderChat(*template_, std::move(input)));
  std::vector<int32_t> ids = EncodeChatPrompt(tokenizer_, rendered);
  if (ids.empty()) return absl::InvalidArgumentError("the chat template rendered an empty prompt");
  return ids;
}

absl::StatusOr<PreparedChat> PromptPreparer::Prepare(const ChatTurn& turn) const {
  if (!template_.ok()) return absl::FailedPreconditionError(template_.status().message());
  const bool tools_active = !turn.tools.empty() && turn.tool_choice.mode != ToolChoiceMode::kNone;
  if (tools_active && syntax_.tool_format == ToolCallFormat::kUnsupported) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tools: this model's chat template calls tools in the ", syntax_.family,
        " syntax, which this server does not parse yet; send the request without tools"));
  }
  const bool forced = turn.tool_choice.mode == ToolChoiceMode::kRequired ||
                      turn.tool_choice.mode == ToolChoiceMode::kNamed;
  if (tools_active && forced && turn.output.kind != OutputFormat::Kind::kText) {
    return absl::InvalidArgumentError(
        "response_format: cannot be combined with a forced tool call (tool_choice required or a "
        "named function): the answer is the call");
  }
  TG_ASSIGN_OR_RETURN(ChatTemplateInput input, TemplateInput(turn, tools_active));
  TG_ASSIGN_OR_RETURN(std::string rendered, RenderChat(*template_, std::move(input)));
  PreparedChat out;
  out.prompt = EncodeChatPrompt(tokenizer_, rendered);
  if (out.prompt.empty()) {
    return absl::InvalidArgumentError("the chat template rendered an empty prompt");
  }
  const ReasoningFormat format = turn.reasoning_format.value_or(options_.default_reasoning_format);
  const ReasoningSyntax reasoning =
      format == ReasoningFormat::kRaw ? ReasoningSyntax::kNone : syntax_.reasoning;
  const bool starts_in_reasoning = PromptOpensReasoning(rendered, syntax_.reasoning);
  const ReasoningGate::Start reasoning_start = starts_in_reasoning ? ReasoningGate::Start::kInside
                                               : PromptClosesReasoning(rendered, syntax_.reasoning)
                                                   ? ReasoningGate::Start::kAfter
                                                   : ReasoningGate::Start::kMayOpen;
  TG_ASSIGN_OR_RETURN(out.constraint,
                      Constraint(turn, tools_active, reasoning_start, &out.shown_special_tokens));

  AssistantOutputOptions& parse = out.answer.options;
  parse.format = syntax_.tool_format;
  parse.reasoning = reasoning;
  parse.starts_in_reasoning = starts_in_reasoning && reasoning != ReasoningSyntax::kNone;
  if (tools_active) {
    parse.tools = turn.tools;
    parse.tool_choice = turn.tool_choice;
  } else {
    parse.tool_choice.mode = ToolChoiceMode::kNone;
  }
  out.answer.parse = tools_active || parse.reasoning != ReasoningSyntax::kNone;
  return out;
}

absl::StatusOr<TokenConstraintFactory> PromptPreparer::OutputConstraint(
    const OutputFormat& format) const {
  TG_ASSIGN_OR_RETURN(std::optional<std::string> gbnf, OutputFormatGbnf(format));
  if (!gbnf.has_value()) return TokenConstraintFactory();
  TG_ASSIGN_OR_RETURN(auto grammar, CompileFor(*gbnf, vocab_, format.field));
  return TokenConstraintFactory([grammar] { return std::make_unique<GrammarConstraint>(grammar); });
}

absl::StatusOr<TokenConstraintFactory> PromptPreparer::Constraint(
    const ChatTurn& turn, bool tools_active, ReasoningGate::Start reasoning_start,
    std::vector<int32_t>* shown) const {
  const Tokenizer* tok = &tokenizer_;
  // The tool-call markers (when tools are offered) and reasoning tags that are control tokens
  // must show in the answer's text, for the parser and the triggered grammar to see them.
  absl::flat_hash_map<std::string, int32_t> marker_tokens;
  if (tools_active) {
    for (const std::string& marker : ToolCallMarkers(syntax_.tool_format, ReasoningSyntax::kNone)) {
      if (const int32_t id = ControlToken(tokenizer_, marker); id >= 0) {
        shown->push_back(id);
        marker_tokens[marker] = id;
      }
    }
  }
  for (std::string_view tag :
       {ReasoningOpenTag(syntax_.reasoning), ReasoningCloseTag(syntax_.reasoning)}) {
    if (tag.empty()) continue;
    if (const int32_t id = ControlToken(tokenizer_, tag); id >= 0) shown->push_back(id);
  }
  std::sort(shown->begin(), shown->end());
  shown->erase(std::unique(shown->begin(), shown->end()), shown->end());
  auto token_text = [tok, shown_ids = *shown](int32_t id) -> std::string_view {
    return std::binary_search(shown_ids.begin(), shown_ids.end(), id) ? tok->TokenText(id)
                                                                      : tok->TokenBytes(id);
  };

  // The answer's own constraint: a tool call (forced, or triggered by the family's marker), or
  // the output format.
  TokenConstraintFactory inner;
  if (tools_active) {
    // The reasoning block is the gate's (below): the grammar covers the calls only.
    ToolCallGrammarOptions o;
    o.parallel_tool_calls = turn.parallel_tool_calls;
    o.marker_tokens = std::move(marker_tokens);
    const nlohmann::json tools = nlohmann::json::parse(ToolsAsOpenAiJson(turn.tools).dump());
    std::string gbnf;
    std::vector<ConstraintTrigger> triggers;
    if (turn.tool_choice.mode == ToolChoiceMode::kAuto) {
      TG_ASSIGN_OR_RETURN(AutoToolCallGrammar g,
                          AutoToolCallGrammarFor(syntax_.tool_format, tools, o));
      gbnf = std::move(g.gbnf);
      for (const GrammarTrigger& t : g.triggers) {
        triggers.push_back({t.text, t.type == GrammarTrigger::Type::kAtStart});
      }
    } else {
      TG_ASSIGN_OR_RETURN(gbnf, ToolCallGrammar(syntax_.tool_format, tools, turn.tool_choice, o));
    }
    TG_ASSIGN_OR_RETURN(auto grammar, CompileFor(gbnf, vocab_, "tools"));
    if (triggers.empty()) {
      inner = [grammar] { return std::make_unique<GrammarConstraint>(grammar); };
    } else {
      inner = [grammar, triggers, token_text] {
        return std::make_unique<TriggeredConstraint>(grammar, triggers, token_text);
      };
    }
  } else {
    TG_ASSIGN_OR_RETURN(inner, OutputConstraint(turn.output));
  }

  // A thinking model: the reasoning block stays free (within its budget) and the answer after it
  // takes the constraint.
  const std::optional<int> budget =
      turn.reasoning_budget.has_value() ? turn.reasoning_budget : options_.default_reasoning_budget;
  if (syntax_.reasoning == ReasoningSyntax::kNone || (!inner && !budget.has_value())) {
    return inner;
  }
  auto tags = std::make_shared<ReasoningTags>();
  tags->open = std::string(ReasoningOpenTag(syntax_.reasoning));
  tags->close = std::string(ReasoningCloseTag(syntax_.reasoning));
  tags->open_id = tokenizer_.TokenToId(tags->open);
  tags->close_ids = EncodeChatPrompt(tokenizer_, tags->close);
  return TokenConstraintFactory([tags = std::shared_ptr<const ReasoningTags>(tags), reasoning_start,
                                 budget, inner, token_text] {
    return std::make_unique<ReasoningGate>(tags, reasoning_start, budget, inner ? inner() : nullptr,
                                           token_text);
  });
}

}  // namespace textgen::server
