// A Hugging Face tokenizer.json of arbitrary bytes -> VocabData -> Tokenizer, then a few texts
// encoded and decoded. An input starting with byte 0x01 is read (without that byte) beside a
// fixed tokenizer_config.json naming BOS/EOS tokens, so the special-token lookups run too.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "fuzz/fuzz_file.h"

namespace {

struct Dirs {
  textgen::fuzz::FuzzFile json{"tokenizer.json"};
  textgen::fuzz::FuzzDir alone;
  textgen::fuzz::FuzzDir with_config;
  Dirs() {
    alone.Link("tokenizer.json", json);
    with_config.Link("tokenizer.json", json);
    with_config.Put("tokenizer_config.json",
                    R"({"bos_token": "<s>", "eos_token": {"content": "</s>"},)"
                    R"( "add_bos_token": true, "pad_token": null})");
  }
};

void Exercise(const textgen::Tokenizer& tok) {
  for (const char* text : {"Hello world", " <s>a</s>\n\n 12345 \xc3\xa9\xff", ""}) {
    for (bool special : {false, true}) {
      std::vector<int32_t> ids = tok.Encode(text, /*add_bos=*/true, special);
      textgen::IncrementalDetokenizer detok(tok);
      for (int32_t id : ids) (void)detok.Add(id);
      (void)detok.Flush();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Dirs dirs;
  const bool config = size > 0 && data[0] == 0x01;
  if (config) ++data, --size;
  dirs.json.Write(data, size);
  auto vocab =
      textgen::VocabFromHfTokenizerJson(config ? dirs.with_config.path() : dirs.alone.path());
  if (!vocab.ok()) return 0;
  auto tok = textgen::Tokenizer::Create(*std::move(vocab));
  if (!tok.ok()) return 0;
  Exercise(**tok);
  return 0;
}
