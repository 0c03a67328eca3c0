#include "engine/ops/widen_amx_matmul.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "engine/ops/amx_matmul.h"
#include "engine/ops/half.h"
#include "engine/ops/weight_convert.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace widen_amx_matmul_test {

using testing::Random;

TEST_CASE("WidenAmxMatmul equals the BF16 product of the widened weights") {
  if (!AmxBf16Matmul::Available()) {
    WARN("no AMX here: WidenAmxMatmul not tested");
    return;
  }
  for (int64_t out : {1, 33, 300, 1000}) {
    for (int64_t in : {32, 96, 768}) {
      const std::vector<BlockQ8_0> q =
          testing::RandomBlocks(out * in / kQ8_0Block, 3 + out + in, 0.01f);
      const WeightView w{WeightType::kQ8_0, q.data(), out, in};
      std::vector<uint16_t> wb(out * in);
      ConvertRowsBf16(w, 0, out, wb.data());
      auto m = WidenAmxMatmul::Create(w);
      REQUIRE(m.ok());
      for (int64_t n : {1, 5, 17, 128}) {
        const std::vector<float> x = Random(n * in, 9 + n);
        std::vector<float> y(n * out, NAN);
        REQUIRE((*m)->Run(x.data(), n, y.data()).ok());
        double worst = 0;
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t r = 0; r < out; ++r) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < in; ++k) {
              // Activations rounded to BF16 as the kernel does; weights exactly as widened.
              const float xb = half::Bf16ToF32(half::F32ToBf16(x[i * in + k]));
              const double p = static_cast<double>(xb) * half::Bf16ToF32(wb[r * in + k]);
              ref += p;
              mag += std::fabs(p);
            }
            const double err = std::fabs(y[i * out + r] - ref) / (mag + 1e-30);
            worst = std::isnan(y[i * out + r]) ? 1e9 : std::max(worst, err);
          }
        }
        INFO("out " << out << " in " << in << " n " << n);
        CHECK(worst <= 1e-5);
      }
    }
  }
}

}  // namespace widen_amx_matmul_test
}  // namespace textgen::ops
