// Each architecture family end to end through the server: a streamed greedy generation on the
// family's test model (../shared/models/arch) follows llama.cpp's reference and stops at the
// family's own end-of-generation token (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>), found
// by its text as llama.cpp finds it.
//
// The arch models share TinyStories-656K's vocabulary, which has none of those tokens, so each
// test writes a copy of the model whose vocabulary names one token the reference generates
// after that family's end token (a control token). Greedy decoding must then stream the
// reference up to and including that token and finish with EOS.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/format/gguf_file.h"
#include "engine/format/gguf_writer.h"
#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace arch_eog_test {

struct Family {
  std::string model;     // arch/<model>.gguf, reference arch/<model>.greedy.json
  std::string eog_text;  // the family's end-of-turn token text
};

// A copy of `src` with token `id` renamed to `text` and typed as a control token.
std::string WriteWithEogToken(const std::string& src, int32_t id, const std::string& text) {
  auto gguf = GgufFile::Open(src);
  REQUIRE(gguf.ok());
  GgufWriter w;
  for (const auto& [key, value] : (*gguf)->metadata()) {
    GgufValue v = value;
    if (key == "tokenizer.ggml.tokens") {
      REQUIRE(static_cast<size_t>(id) < v.array.size());
      v.array[id] = GgufString(text);
    } else if (key == "tokenizer.ggml.token_type") {
      REQUIRE(static_cast<size_t>(id) < v.array.size());
      v.array[id] = GgufInt(GgufValueType::kInt32, 3);  // CONTROL
    }
    w.Set(key, std::move(v));
  }
  for (const GgufTensorInfo& t : (*gguf)->tensors()) {
    REQUIRE(w.AddTensor(t.name, t.type, t.dims, absl::MakeConstSpan(t.data, t.num_bytes)).ok());
  }
  const std::string out = ScratchDir() + "/eog.gguf";
  REQUIRE(w.Write(out).ok());
  return out;
}

TEST_CASE("every architecture family streams through the server and stops at its EOG token",
          "[server][arch]") {
  const std::vector<Family> families = {
      {"llama-rope-llama3", "<|eot_id|>"},
      {"qwen2", "<|im_end|>"},
      {"qwen3", "<|im_end|>"},
      {"phi3", "<|end|>"},
      {"gemma2", "<end_of_turn>"},
      {"gemma3", "<end_of_turn>"},
  };
  for (const Family& f : families) {
    INFO("model " << f.model);
    int n_predict = 0;
    const ReferenceCase ref = LoadReference(&n_predict, "arch/" + f.model + ".greedy.json")[0];
    // The first generated token from step 4 on that the reference has not produced before:
    // greedy decoding reaches it exactly there.
    size_t stop = 4;
    auto seen_before = [&](size_t i) {
      for (size_t j = 0; j < i; ++j) {
        if (ref.generated_ids[j] == ref.generated_ids[i]) return true;
      }
      return false;
    };
    while (stop < ref.generated_ids.size() && seen_before(stop)) ++stop;
    REQUIRE(stop < ref.generated_ids.size());
    const int32_t eog = ref.generated_ids[stop];
    const std::string model =
        WriteWithEogToken(ModelPath("arch/" + f.model + ".gguf"), eog, f.eog_text);

    ServerProcessOptions o;
    o.model = model;
    o.extra_args = {"--compute", "f32"};
    ServerProcess server(o);
    auto stub = NewStub(server);
    const v1::ModelInfo info = GetInfo(*stub);
    CHECK(std::find(info.eog_token_ids().begin(), info.eog_token_ids().end(), eog) !=
          info.eog_token_ids().end());

    v1::GenerateRequest req;
    req.mutable_prompt_ids()->Add(ref.prompt_ids.begin(), ref.prompt_ids.end());
    req.set_max_new_tokens(64);
    const StreamResult r = RunGenerate(*stub, req);
    REQUIRE(r.status.ok());
    CHECK(r.messages.size() > 2);  // streamed, not one message
    const std::vector<int32_t> want(ref.generated_ids.begin(),
                                    ref.generated_ids.begin() + stop + 1);
    CHECK(r.ids == want);
    CHECK(r.last.finish_reason() == v1::EOS);
  }
}

}  // namespace arch_eog_test
}  // namespace textgen::testing
