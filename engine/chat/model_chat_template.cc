#include "engine/chat/model_chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/format/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// tokenizer_config.json's chat_template: a string, or a list of {"name", "template"} whose
// "default" entry transformers uses.
absl::StatusOr<std::string> TemplateFromConfig(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  if (!j.is_object() || !j.contains("chat_template")) {
    return absl::NotFoundError(absl::StrCat(path, " has no chat_template"));
  }
  const nlohmann::json& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const nlohmann::json& e : t) {
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
          e["template"].is_string()) {
        return e["template"].get<std::string>();
      }
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": chat_template is neither a string nor a list with a \"default\""));
}

absl::StatusOr<std::string> ModelTemplateSource(const std::string& model_path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(model_path)) {
    const std::string jinja = model_path + "/chat_template.jinja";
    if (fs::exists(jinja)) return ReadText(jinja);
    return TemplateFromConfig(model_path + "/tokenizer_config.json");
  }
  TG_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(model_path));
  if (!gguf->Has("tokenizer.chat_template")) {
    return absl::NotFoundError(absl::StrCat(model_path, " has no tokenizer.chat_template"));
  }
  return gguf->GetString("tokenizer.chat_template");
}

std::optional<std::string> TokenText(const Tokenizer& tokenizer, int32_t id) {
  if (id < 0) return std::nullopt;
  return std::string(tokenizer.TokenText(id));
}

// transformers passes the tokenizer's own bos_token / eos_token (tokenizer_config.json: a
// string, an AddedToken object with "content", or null / absent: not passed), which may differ
// from the vocab's ids (Llama 3.1 Instruct: eos_token <|eot_id|>, not <|end_of_text|>).
std::optional<std::string> ConfigToken(const nlohmann::json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const nlohmann::json& t = config[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) {
    return t["content"].get<std::string>();
  }
  return std::nullopt;
}

// The bos/eos texts the template is rendered with: a Hugging Face folder's
// tokenizer_config.json, else (GGUF, as llama.cpp does) the vocab's BOS / EOS tokens.
void SpecialTokens(const std::string& model_path, const Tokenizer& tokenizer,
                   std::optional<std::string>* bos, std::optional<std::string>* eos) {
  const std::string config_path = model_path + "/tokenizer_config.json";
  if (std::filesystem::is_directory(model_path) && std::filesystem::exists(config_path)) {
    absl::StatusOr<std::string> text = ReadText(config_path);
    const nlohmann::json config =
        text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    if (config.is_object()) {
      *bos = ConfigToken(config, "bos_token");
      *eos = ConfigToken(config, "eos_token");
      return;
    }
  }
  *bos = TokenText(tokenizer, tokenizer.bos_id());
  *eos = TokenText(tokenizer, tokenizer.eos_id());
}

}  // namespace

absl::StatusOr<ModelChatTemplate> LoadModelChatTemplate(const std::string& model_path,
                                                        const Tokenizer& tokenizer,
                                                        const std::string& override_path) {
  absl::StatusOr<std::string> source =
      override_path.empty() ? ModelTemplateSource(model_path) : ReadText(override_path);
  if (!source.ok()) {
    if (absl::IsNotFound(source.status()) && override_path.empty()) {
      return absl::NotFoundError(absl::StrCat("the model has no chat template (",
                                              source.status().message(),
                                              "); pass one with --chat-template FILE"));
    }
    return source.status();
  }
  absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(*source);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(override_path.empty() ? "the model's chat template" : override_path, ": ",
                     parsed.status().message()));
  }
  ModelChatTemplate t{*std::move(parsed), std::nullopt, std::nullopt};
  SpecialTokens(model_path, tokenizer, &t.bos_token, &t.eos_token);
  return t;
}

absl::StatusOr<ModelChatTemplate> LoadModelChatTemplate(const Model& model,
                                                        const std::string& override_path) {
  return LoadModelChatTemplate(model.path(), model.tokenizer(), override_path);
}

absl::StatusOr<std::string> RenderChat(const ModelChatTemplate& t, ChatTemplateInput input) {
  if (!input.bos_token) input.bos_token = t.bos_token;
  if (!input.eos_token) input.eos_token = t.eos_token;
  return t.chat_template.Render(input);
}

std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tokenizer, std::string_view rendered) {
  return tokenizer.Encode(rendered, /*add_bos=*/false, /*parse_special=*/true);
}

}  // namespace textgen
