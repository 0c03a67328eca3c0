// GGUF reader on arbitrary bytes: open, every typed getter on every key, the tensor index
// against the file's size (and each tensor's first row converted to F32), then what a model
// load reads from the metadata (hyperparameters, vocabulary and tokenizer).
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "engine/format/gguf_file.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "fuzz/fuzz_file.h"

namespace textgen::fuzz {
namespace {

void ReadMetadata(const GgufFile& gguf) {
  for (const auto& [key, value] : gguf.metadata()) {
    (void)gguf.GetString(key);
    (void)gguf.GetUint(key);
    (void)gguf.GetInt(key);
    (void)gguf.GetFloat(key);
    (void)gguf.GetBool(key);
    (void)gguf.GetStringArray(key);
    (void)gguf.GetFloatArray(key);
    (void)gguf.GetIntArray(key);
  }
}

// The reader promises every tensor lies inside the file; a tensor reaching past it is a bug
// even when the bytes beyond happen to be mapped (the rest of the last page).
void ReadTensors(const GgufFile& gguf, size_t file_size) {
  for (const GgufTensorInfo& t : gguf.tensors()) {
    if (gguf.FindTensor(t.name) != &t) std::abort();
    if (gguf.data_offset() + t.offset + t.num_bytes > file_size) std::abort();
    if (t.num_elements <= 0 || t.dims.empty()) continue;
    const int64_t row = t.dims[0];
    std::vector<float> out(static_cast<size_t>(row));
    ToF32(t.type, t.data, out.data(), row);
  }
}

void ReadModelMetadata(const GgufFile& gguf) {
  if (auto config = ConfigFromGguf(gguf); config.ok()) {
    (void)config->Validate();
    (void)config->DebugString();
  }
  auto tokenizer = Tokenizer::FromGguf(gguf);
  if (!tokenizer.ok()) return;
  for (bool special : {false, true}) {
    std::vector<int32_t> ids =
        (*tokenizer)->Encode("Hello world, <s> 1234 \xe2\x96\x81x", true, special);
    (void)(*tokenizer)->Decode(ids);
  }
}

}  // namespace
}  // namespace textgen::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace textgen;
  static fuzz::FuzzFile* file = new fuzz::FuzzFile("gguf");
  file->Write(data, size);
  auto gguf = GgufFile::Open(file->path());
  if (!gguf.ok()) return 0;
  fuzz::ReadMetadata(**gguf);
  fuzz::ReadTensors(**gguf, size);
  fuzz::ReadModelMetadata(**gguf);
  return 0;
}
