// Tokenizer::ApplyTextRules: llama.cpp's llama_vocab::load rules that go by token text
// (end-of-generation and fill-in-the-middle tokens, per-model strip attributes). They change
// both which ids end generation and how text is split, so they run before the tables are built.
#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "absl/types/span.h"
#include "engine/tokenizer/tokenizer.h"

namespace textgen {
namespace {

bool OneOf(std::string_view text, absl::Span<const std::string_view> list) {
  return std::find(list.begin(), list.end(), text) != list.end();
}

// Texts llama.cpp treats as end of generation (and therefore as control tokens).
bool IsEogText(std::string_view t) {
  return OneOf(t, {"<|eot_id|>",
                   "<|im_end|>",
                   "<|end|>",
                   "<|return|>",
                   "<|call|>",
                   "<|flush|>",
                   "<|calls|>",
                   "<end_of_turn>",
                   "<|endoftext|>",
                   "</s>",
                   "<|eom_id|>",
                   "<EOT>",
                   "_<EOT>",
                   "[EOT]",
                   "[EOS]",
                   "<|end_of_text|>",
                   "<end_of_utterance>",
                   "<eos>",
                   "<turn|>",
                   "<|tool_response>",
                   "<\xEF\xBD\x9C"
                   "end\xE2\x96\x81"
                   "of\xE2\x96\x81"
                   "sentence\xEF\xBD\x9C>",
                   "[e~["});
}

// Fill-in-the-middle texts by role; llama.cpp makes the first match of each a control token
// when the GGUF key is absent, and pad / repo / separator also end generation.
constexpr std::string_view kFimPre[] = {"<|fim_prefix|>",
                                        "<fim-prefix>",
                                        "<fim_prefix>",
                                        "<\xEF\xBD\x9C"
                                        "fim\xE2\x96\x81"
                                        "begin\xEF\xBD\x9C>",
                                        "<PRE>",
                                        "\xE2\x96\x81<PRE>",
                                        "<|code_prefix|>",
                                        "<|prefix|>"};
constexpr std::string_view kFimSuf[] = {"<|fim_suffix|>",
                                        "<fim-suffix>",
                                        "<fim_suffix>",
                                        "<\xEF\xBD\x9C"
                                        "fim\xE2\x96\x81"
                                        "hole\xEF\xBD\x9C>",
                                        "<SUF>",
                                        "\xE2\x96\x81<SUF>",
                                        "<|code_suffix|>",
                                        "<|suffix|>"};
constexpr std::string_view kFimMid[] = {"<|fim_middle|>",
                                        "<fim-middle>",
                                        "<fim_middle>",
                                        "<\xEF\xBD\x9C"
                                        "fim\xE2\x96\x81"
                                        "end\xEF\xBD\x9C>",
                                        "<MID>",
                                        "\xE2\x96\x81<MID>",
                                        "<|code_middle|>",
                                        "<|middle|>"};
constexpr std::string_view kFimPad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                        "<reponame>"};
constexpr std::string_view kFimSep[] = {"<|file_sep|>"};

}  // namespace

void Tokenizer::ApplyTextRules() {
  VocabData& v = vocab_;
  const int32_t n = static_cast<int32_t>(v.tokens.size());
  if (v.types.empty()) v.types.assign(n, TokenType::kNormal);
  const auto make_control = [&](int32_t id) { v.types[id] = TokenType::kControl; };

  // FIM roles: a GGUF key wins; otherwise the lowest id whose text is on the role's list.
  int32_t fim_ids[6] = {-1, -1, -1, v.fim_pad_id, v.fim_rep_id, v.fim_sep_id};
  const absl::Span<const std::string_view> fim_lists[6] = {kFimPre, kFimSuf, kFimMid,
                                                           kFimPad, kFimRep, kFimSep};
  for (int role = 0; role < 6; ++role) {
    if (fim_ids[role] >= 0) continue;
    for (int32_t id = 0; id < n; ++id) {
      if (OneOf(v.tokens[id], fim_lists[role])) {
        fim_ids[role] = id;
        make_control(id);
        break;
      }
    }
  }

  std::vector<int32_t> eog;
  for (int role = 3; role < 6; ++role) {
    if (fim_ids[role] >= 0) eog.push_back(fim_ids[role]);
  }
  for (int32_t id = 0; id < n; ++id) {
    if (IsEogText(v.tokens[id])) {
      eog.push_back(id);
      make_control(id);
    }
    // gpt-oss: llama.cpp always renders these.
    if (OneOf(v.tokens[id], {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})) {
      v.types[id] = TokenType::kUserDefined;
    }
  }
  for (int32_t id : {v.eos_id, v.eot_id, v.eom_id}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

  const auto eog_with_text = [&](absl::Span<const std::string_view> texts) {
    for (int32_t id : eog) {
      if (OneOf(v.tokens[id], texts)) return id;
    }
    return -1;
  };
  // o200k_harmony / solar-open: <|end|> separates messages there and must not end generation.
  const int32_t end_id = eog_with_text({"<|end|>"});
  const bool has_call = eog_with_text({"<|call|>", "<|calls|>"}) >= 0;
  if (end_id >= 0 && has_call &&
      (eog_with_text({"<|return|>"}) >= 0 || eog_with_text({"<|flush|>"}) >= 0)) {
    eog.erase(std::find(eog.begin(), eog.end(), end_id));
    v.types[end_id] = TokenType::kUserDefined;
  }
  // Gemma 4 / PaddleOCR: </s> is ordinary text when <|tool_response> exists.
  const int32_t s_id = eog_with_text({"</s>"});
  if (s_id >= 0 && eog_with_text({"<|tool_response>"}) >= 0) {
    eog.erase(std::find(eog.begin(), eog.end(), s_id));
    v.types[s_id] = TokenType::kNormal;
  }
  eog_ids_ = std::move(eog);

  // Candidates for matching as units, with the types as retyped above (llama.cpp builds its
  // special-token cache after these rules).
  for (int32_t i = 0; i < n; ++i) {
    const TokenType t = v.types[i];
    if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
        !v.tokens[i].empty()) {
      specials_.push_back(i);
    }
  }

  if (v.phi3_rstrip) {
    v.rstrip.resize(n, false);
    for (int32_t id = 0; id < n; ++id) {
      const TokenType t = v.types[id];
      if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown ||
          v.tokens[id] == "</s>") {
        v.rstrip[id] = true;
      }
      if (OneOf(v.tokens[id], {"<unk>", "<s>", "<|endoftext|>"})) v.rstrip[id] = false;
    }
  }
}

}  // namespace textgen
