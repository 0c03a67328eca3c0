// Shared by the Generation tests: a model with a KV cache of its own.
#ifndef TEXTGEN_TESTS_ENGINE_DECODING_GENERATION_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_DECODING_GENERATION_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <utility>

#include "engine/kv_cache/kv_cache.h"
#include "engine/model/model.h"
#include "tests/test_util.h"

namespace textgen::testing {

// $TEXTGEN_MODELS/`name` loaded with default options and an F32 KV pool of `num_blocks`.
struct ModelWithCache {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> cache;

  explicit ModelWithCache(const std::string& name, int num_blocks = 600) {
    auto m = Model::Load(ModelPath(name));
    REQUIRE(m.ok());
    model = std::move(m).value();
    const ModelConfig& c = model->config();
    KvCacheOptions o;
    o.n_layers = c.n_layers;
    o.n_kv_heads = c.n_kv_heads;
    o.head_dim = c.head_dim;
    o.num_blocks = num_blocks;
    auto kc = KvCache::Create(o);
    REQUIRE(kc.ok());
    cache = std::move(kc).value();
  }
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_ENGINE_DECODING_GENERATION_TEST_UTIL_H_
