// A model's own template and special tokens, from vocab-only GGUFs and Hugging Face tokenizer
// folders whose templates are in ../shared/chat-templates, rendered to the same bytes as
// Python jinja2 renders there; the errors of a model without a template; the prompt's tokens.
#include "engine/chat/model_chat_template.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace textgen {
namespace model_chat_template_test {

using nlohmann::ordered_json;

struct Known {
  const char* model;      // under $TEXTGEN_MODELS
  const char* template_;  // the same template in shared/chat-templates/templates
};

ChatTemplateInput Conversation(const std::string& stem, bool agp) {
  const ordered_json conv = ordered_json::parse(
      testing::ReadFile(testing::ChatTemplatesDir() + "/conversations/" + stem + ".json"));
  ChatTemplateInput input;
  input.messages = conv["messages"];
  input.add_generation_prompt = agp;
  return input;
}

TEST_CASE("model templates from GGUF and Hugging Face folders render as jinja2 does") {
  const Known known[] = {
      {"vocab/ggml-vocab-qwen3.gguf", "Qwen-Qwen3-0.6B"},
      {"vocab/ggml-vocab-llama3.1.gguf", "Llama-3.1-lenml"},
      {"vocab/ggml-vocab-gemma3.gguf", "gemma-3-lenml"},
      {"hf-tokenizers/qwen3", "Qwen-Qwen3-0.6B"},
      {"hf-tokenizers/llama3.1", "Llama-3.1-lenml"},
      {"hf-tokenizers/gemma3", "gemma-3-lenml"},
  };
  const std::string dir = testing::ChatTemplatesDir();
  const ordered_json tokens =
      ordered_json::parse(testing::ReadFile(dir + "/templates/tokens.json"));
  for (const Known& k : known) {
    INFO(k.model);
    auto tokenizer = LoadTokenizer(testing::ModelPath(k.model));
    REQUIRE(tokenizer.ok());
    absl::StatusOr<ModelChatTemplate> t =
        LoadModelChatTemplate(testing::ModelPath(k.model), **tokenizer);
    REQUIRE(t.ok());
    const std::string name = std::string(k.template_);
    CHECK(t->chat_template.source() == testing::ReadFile(dir + "/templates/" + name + ".jinja"));
    const std::string hf = std::string(k.model).rfind("hf-", 0) == 0 ? "hf" : "gguf";
    if (hf == "hf") {
      // transformers' tokens (tokenizer_config.json), as render_expected.py passes them.
      const ordered_json& tok = tokens[name + ".jinja"];
      CHECK(t->bos_token ==
            (tok["bos_token"].is_null()
                 ? std::nullopt
                 : std::optional<std::string>(tok["bos_token"].get<std::string>())));
      CHECK(t->eos_token ==
            (tok["eos_token"].is_null()
                 ? std::nullopt
                 : std::optional<std::string>(tok["eos_token"].get<std::string>())));
    }
    for (const char* conv : {"01-system-user", "11-system-multi-turn", "04-unicode-emoji"}) {
      for (bool agp : {true, false}) {
        absl::StatusOr<std::string> got = RenderChat(*t, Conversation(conv, agp));
        REQUIRE(got.ok());
        CHECK(*got == testing::ReadFile(dir + "/expected/" + name + "/" + conv + ".agp-" +
                                        (agp ? "true" : "false") + ".txt"));
      }
    }
  }
}

TEST_CASE("the prompt's tokens: special-token texts become their tokens and no BOS is added") {
  auto tokenizer = LoadTokenizer(testing::ModelPath("vocab/ggml-vocab-llama3.1.gguf"));
  REQUIRE(tokenizer.ok());
  const Tokenizer& tok = **tokenizer;
  auto t = LoadModelChatTemplate(testing::ModelPath("vocab/ggml-vocab-llama3.1.gguf"), tok);
  REQUIRE(t.ok());
  const std::string text = *RenderChat(*t, Conversation("02-multi-turn", true));
  const std::vector<int32_t> ids = EncodeChatPrompt(tok, text);
  // The template writes <|begin_of_text|> itself: exactly one, first.
  const int32_t bot = tok.TokenToId("<|begin_of_text|>");
  const int32_t header = tok.TokenToId("<|start_header_id|>");
  REQUIRE(bot >= 0);
  REQUIRE(header >= 0);
  CHECK(ids.front() == bot);
  CHECK(std::count(ids.begin(), ids.end(), bot) == 1);
  size_t headers_in_text = 0;
  for (size_t p = text.find("<|start_header_id|>"); p != std::string::npos;
       p = text.find("<|start_header_id|>", p + 1)) {
    ++headers_in_text;
  }
  CHECK(static_cast<size_t>(std::count(ids.begin(), ids.end(), header)) == headers_in_text);
  CHECK(headers_in_text == 4);
  // Plain Encode would not turn the texts into control tokens.
  const std::vector<int32_t> plain = tok.Encode(text, false, /*parse_special=*/false);
  CHECK(std::count(plain.begin(), plain.end(), header) == 0);
}

TEST_CASE("a model without a template, an override, and bad override files") {
  const std::string model_path = testing::ModelPath("stories260K.gguf");
  auto model = Model::Load(model_path);
  REQUIRE(model.ok());
  absl::StatusOr<ModelChatTemplate> none = LoadModelChatTemplate(**model);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(none.status().message()), Catch::Contains("--chat-template"));

  const std::string dir = testing::ScratchDir();
  testing::WriteFile(dir + "/t.jinja",
                     "{{ bos_token }}{% for m in messages %}[{{ m.content }}]{% endfor %}");
  absl::StatusOr<ModelChatTemplate> over = LoadModelChatTemplate(**model, dir + "/t.jinja");
  REQUIRE(over.ok());
  const Tokenizer& tok = (*model)->tokenizer();
  REQUIRE(over->bos_token == std::string(tok.TokenText(tok.bos_id())));
  ChatTemplateInput input = Conversation("03-user-only", false);
  CHECK(*RenderChat(*over, input) ==
        *over->bos_token + "[" + input.messages[0]["content"].get<std::string>() + "]");
  input.bos_token = "B";  // the request's token wins over the model's
  CHECK(RenderChat(*over, input)->rfind("B[", 0) == 0);

  absl::StatusOr<ModelChatTemplate> missing = LoadModelChatTemplate(**model, dir + "/nope.jinja");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("nope.jinja"));
  testing::WriteFile(dir + "/bad.jinja", "{% if x %}");
  absl::StatusOr<ModelChatTemplate> bad = LoadModelChatTemplate(**model, dir + "/bad.jinja");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("bad.jinja"));

  // A Hugging Face folder without a chat_template.
  auto hf_tok = LoadTokenizer(testing::ModelPath("tinystories-656k-hf"));
  REQUIRE(hf_tok.ok());
  absl::StatusOr<ModelChatTemplate> hf_none =
      LoadModelChatTemplate(testing::ModelPath("tinystories-656k-hf"), **hf_tok);
  CHECK(hf_none.status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("tokenizer_config.json chat_template lists use the default entry") {
  const std::string dir = testing::ScratchDir();
  auto tok = LoadTokenizer(testing::ModelPath("hf-tokenizers/qwen3"));
  REQUIRE(tok.ok());
  testing::WriteFile(dir + "/tokenizer_config.json", R"({
    "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ eos_token }}"}],
    "bos_token": null, "eos_token": {"content": "<|im_end|>", "lstrip": false}})");
  absl::StatusOr<ModelChatTemplate> t = LoadModelChatTemplate(dir, **tok);
  REQUIRE(t.ok());
  CHECK(*RenderChat(*t, {}) == "D<|im_end|>");
  CHECK_FALSE(t->bos_token.has_value());
  // chat_template.jinja beside it wins, as in recent transformers.
  testing::WriteFile(dir + "/chat_template.jinja", "J");
  CHECK(*RenderChat(*LoadModelChatTemplate(dir, **tok), {}) == "J");
  std::remove((dir + "/chat_template.jinja").c_str());
  testing::WriteFile(dir + "/tokenizer_config.json", R"({"chat_template": [{"name": "x"}]})");
  CHECK(LoadModelChatTemplate(dir, **tok).status().code() == absl::StatusCode::kInvalidArgument);
  testing::WriteFile(dir + "/tokenizer_config.json", "{not json");
  CHECK(LoadModelChatTemplate(dir, **tok).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace model_chat_template_test
}  // namespace textgen
