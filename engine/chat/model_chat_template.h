// A model's own chat template and the special-token texts it is rendered with.
#ifndef TEXTGEN_ENGINE_CHAT_MODEL_CHAT_TEMPLATE_H_
#define TEXTGEN_ENGINE_CHAT_MODEL_CHAT_TEMPLATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/chat/chat_template.h"
#include "engine/model/model.h"

namespace textgen {

struct ModelChatTemplate {
  ChatTemplate chat_template;
  // The texts passed as bos_token / eos_token: a Hugging Face folder's tokenizer_config.json
  // values (as transformers passes them; unset when null or absent), a GGUF's BOS / EOS tokens
  // (as llama.cpp passes them; unset when the vocab has none).
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
};

// The template of `model`: from `override_path` if non-empty (a file holding Jinja source),
// else GGUF `tokenizer.chat_template` or tokenizer_config.json's `chat_template` (the "default"
// entry when it is a list of named templates). NotFound when the model has none and no override
// is given (the message says to pass --chat-template); InvalidArgument when it does not parse.
absl::StatusOr<ModelChatTemplate> LoadModelChatTemplate(const Model& model,
                                                        const std::string& override_path = "");
// The same from a model's path (GGUF file or Hugging Face folder) and its tokenizer, without
// loading the weights (for `textgen-run --render`; vocab-only GGUFs work).
absl::StatusOr<ModelChatTemplate> LoadModelChatTemplate(const std::string& model_path,
                                                        const Tokenizer& tokenizer,
                                                        const std::string& override_path = "");

// Renders `input` with the template, filling bos_token / eos_token from the model when the
// input leaves them unset.
absl::StatusOr<std::string> RenderChat(const ModelChatTemplate& t, ChatTemplateInput input);

// The token ids of a rendered chat as transformers' apply_chat_template(tokenize=True) makes
// them: special-token texts become their tokens (parse_special), and no BOS is added (the
// template writes bos_token itself when the model wants one).
std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tokenizer, std::string_view rendered);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_CHAT_MODEL_CHAT_TEMPLATE_H_
