// A KV cache for a model in the engine's model and decoding tests.
#ifndef TEXTGEN_TESTS_ENGINE_MODEL_TEST_CACHE_H_
#define TEXTGEN_TESTS_ENGINE_MODEL_TEST_CACHE_H_

#include <catch2/catch.hpp>
#include <memory>

#include "engine/kv_cache/kv_cache.h"
#include "engine/model/model_config.h"

namespace textgen::testing {

struct TestCacheShape {
  KvType type = KvType::kF32;
  int num_blocks = 64;
  int block_size = 16;
};

// A cache of `shape` for `c`'s layers and heads; fails the test if it cannot be made.
inline std::unique_ptr<KvCache> MakeTestCache(const ModelConfig& c, TestCacheShape shape = {}) {
  KvCacheOptions o;
  o.n_layers = c.n_layers;
  o.n_kv_heads = c.n_kv_heads;
  o.head_dim = c.head_dim;
  o.block_size = shape.block_size;
  o.num_blocks = shape.num_blocks;
  o.type = shape.type;
  auto cache = KvCache::Create(o);
  REQUIRE(cache.ok());
  return std::move(cache).value();
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_ENGINE_MODEL_TEST_CACHE_H_
