// A Hugging Face config.json of arbitrary bytes -> ModelConfig (every value type- and
// range-checked), then what the model derives from it.
#include <cstdint>

#include "engine/model/model_config.h"
#include "fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace textgen;
  static fuzz::FuzzFile* file = new fuzz::FuzzFile("config.json");
  file->Write(data, size);
  auto config = ConfigFromHfConfigJson(file->path());
  if (!config.ok()) return 0;
  if (!config->Validate().ok()) return 0;
  (void)config->DebugString();
  for (int n_ctx : {1, config->n_ctx, config->n_ctx + 1}) (void)RopeFactorsFor(*config, n_ctx);
  for (int layer = 0; layer < config->n_layers; ++layer) (void)config->IsSwaLayer(layer);
  return 0;
}
