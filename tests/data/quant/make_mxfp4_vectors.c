// MXFP4 test vectors from ggml itself: quantize deterministic F32 rows with
// ggml_quantize_chunk(GGML_TYPE_MXFP4) (= quantize_row_mxfp4_ref) and dequantize them with the
// type traits' to_float (= dequantize_row_mxfp4). Writes a GGUF with three tensors:
//   source      F32   [256 x 32]  the input rows
//   mxfp4       MXFP4 [256 x 32]  ggml's bytes
//   dequant     F32   [256 x 32]  ggml's values
// Build: cc -O2 make_mxfp4_vectors.c -I/work/llama-src/ggml/include -L/work/llama-build/bin
//        -lggml-base -lm -Wl,-rpath,/work/llama-build/bin -o make_mxfp4_vectors
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "gguf.h"

enum { kCols = 256, kRows = 32 };

static uint64_t state = 20261130;
static uint64_t Next(void) {  // splitmix64
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double Uniform(void) { return (double)(Next() >> 11) * 0x1p-53; }
static double Normal(void) {
  double u = Uniform(), v = Uniform();
  if (u < 1e-300) u = 1e-300;
  return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static const char* kRowNotes[kRows] = {
    "all zeros",
    "constant +0.5",
    "constant -2.0 (negative all-equal block)",
    "constant +3.0 (amax 3: scale 2^-1, codes exact)",
    "N(0,1)",
    "N(0,0.02)",
    "N(0,100)",
    "alternating +1,-1",
    "a single non-zero (+1 at column 100)",
    "midpoints between codes at scale 1 (x.25, x.75, 1.25, 1.75, 2.5, 3.5, 5, both signs), amax 4",
    "midpoints +- 1 ulp",
    "values above 6x the scale (saturate at code 6): 7.9, -7.99, 6.5, ...",
    "amax exactly a power of two 2^k and 2^k - ulp (log2f rounding at the floor boundary)",
    "large: N(0,1) * 1e30",
    "near the F32 maximum: N(0,1) * 1e37 with 3.4e38 in each block",
    "tiny: N(0,1) * 1e-30",
    "amax near 2^-125 (e near 0: subnormal half-scales 2^-128, 2^-127)",
    "amax below 2^-125: ggml's (uint8_t) of a negative float (x86: low byte of the int32)",
    "subnormal inputs: N(0,1) * 1e-40",
    "one NaN per block, N(0,1) elsewhere",
    "one +inf in block 0 and -inf in block 1, N(0,1) elsewhere",
    "negative zeros with one -0.25",
    "ramp linspace(-1, 1, 256)",
    "integers -8..7 repeated",
    "32-blocks with std 10^(b-4), b = 0..7",
    "Student-t-like heavy tails: N/|N|^0.5",
    "Laplace(0,1)",
    "all positive U[0,1)",
    "all negative -U[0,1)",
    "10 + N(0,0.1)",
    "per-block scales 10^U(-6,6) times N(0,1)",
    "N(0,1) per block scaled by 2^k exactly, k = -20..20",
};

static void Fill(float* x) {
  for (int r = 0; r < kRows; ++r) {
    float* row = x + r * kCols;
    for (int c = 0; c < kCols; ++c) {
      const int b = c / 32, j = c % 32;
      float v = 0.0f;
      switch (r) {
        case 0:
          v = 0.0f;
          break;
        case 1:
          v = 0.5f;
          break;
        case 2:
          v = -2.0f;
          break;
        case 3:
          v = 3.0f;
          break;
        case 4:
          v = (float)Normal();
          break;
        case 5:
          v = (float)(0.02 * Normal());
          break;
        case 6:
          v = (float)(100 * Normal());
          break;
        case 7:
          v = (c % 2) ? -1.0f : 1.0f;
          break;
        case 8:
          v = c == 100 ? 1.0f : 0.0f;
          break;
        case 9: {
          static const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 4.0f};
          v = mids[j % 8] * ((j / 8) % 2 ? -1.0f : 1.0f);
          if (j == 31) v = 4.0f;
          break;
        }
        case 10: {
          static const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
          float m = mids[j % 7];
          v = (j / 7) % 2 ? nextafterf(m, 10.0f) : nextafterf(m, 0.0f);
          if ((j / 14) % 2) v = -v;
          if (j == 31) v = 4.0f;
          break;
        }
        case 11: {
          static const float big[] = {7.9f, -7.99f, 6.5f, -6.0f, 5.9f, 7.0f, -5.5f, 4.5f};
          v = j < 8 ? big[j] : (float)Normal();
          break;
        }
        case 12: {
          const float p = ldexpf(1.0f, b * 3 - 10);
          v = (float)Normal() * p * 0.5f;
          if (j == 0) v = (b % 2) ? nextafterf(p, 0.0f) : p;
          break;
        }
        case 13:
          v = (float)(Normal() * 1e30);
          break;
        case 14:
          v = j == 5 ? 3.4e38f : (float)(Normal() * 1e37);
          break;
        case 15:
          v = (float)(Normal() * 1e-30);
          break;
        case 16:
          v = (float)(Normal() * ldexp(1.0, -125 + (b % 4) - 2));
          break;
        case 17:
          v = (float)(Normal() * ldexp(1.0, -126 - 2 * b));
          break;
        case 18:
          v = (float)(Normal() * 1e-40);
          break;
        case 19:
          v = j == 3 ? NAN : (float)Normal();
          break;
        case 20:
          v = (float)Normal();
          if (c == 7) v = INFINITY;
          if (c == 40) v = -INFINITY;
          break;
        case 21:
          v = c == 7 ? -0.25f : -0.0f;
          break;
        case 22:
          v = (float)(-1.0 + 2.0 * c / (kCols - 1));
          break;
        case 23:
          v = (float)(c % 16 - 8);
          break;
        case 24:
          v = (float)(Normal() * pow(10.0, b - 4));
          break;
        case 25: {
          double g = Normal(), h = Normal();
          v = (float)(g / sqrt(fabs(h) + 1e-3));
          break;
        }
        case 26: {
          double u = Uniform() - 0.5;
          v = (float)((u < 0 ? 1 : -1) * log(1 - 2 * fabs(u)));
          break;
        }
        case 27:
          v = (float)Uniform();
          break;
        case 28:
          v = (float)-Uniform();
          break;
        case 29:
          v = (float)(10 + 0.1 * Normal());
          break;
        case 30: {
          static double scale[8];
          if (j == 0) scale[b] = pow(10.0, -6 + 12 * Uniform());
          v = (float)(Normal() * scale[b]);
          break;
        }
        case 31:
          v = ldexpf((float)Normal(), -20 + (int)(Next() % 41));
          break;
      }
      row[c] = v;
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s OUT.gguf LLAMA_CPP_COMMIT\n", argv[0]);
    return 2;
  }
  static float src[kRows * kCols], deq[kRows * kCols];
  Fill(src);
  const size_t qbytes = ggml_row_size(GGML_TYPE_MXFP4, kCols) * kRows;
  uint8_t* q = malloc(qbytes);
  const size_t written = ggml_quantize_chunk(GGML_TYPE_MXFP4, src, q, 0, kRows, kCols, NULL);
  if (written != qbytes) return 1;
  ggml_get_type_traits(GGML_TYPE_MXFP4)->to_float(q, deq, kRows * kCols);

  struct ggml_init_params ip = {16 * 1024 * 1024, NULL, false};
  struct ggml_context* ctx = ggml_init(ip);
  struct gguf_context* g = gguf_init_empty();
  gguf_set_val_str(g, "general.architecture", "mxfp4-vectors");
  gguf_set_val_str(g, "mxfp4_vectors.llama_cpp_commit", argv[2]);
  gguf_set_val_str(g, "mxfp4_vectors.made_by",
                   "make_mxfp4_vectors.c: ggml_quantize_chunk(GGML_TYPE_MXFP4) and "
                   "ggml_get_type_traits(GGML_TYPE_MXFP4)->to_float, splitmix64 seed 20261130");
  const char* notes[kRows];
  for (int r = 0; r < kRows; ++r) notes[r] = kRowNotes[r];
  gguf_set_arr_str(g, "mxfp4_vectors.rows", notes, kRows);
  struct {
    const char* name;
    enum ggml_type type;
    void* data;
  } ts[] = {{"source", GGML_TYPE_F32, src},
            {"mxfp4", GGML_TYPE_MXFP4, q},
            {"dequant", GGML_TYPE_F32, deq}};
  for (int i = 0; i < 3; ++i) {
    struct ggml_tensor* t = ggml_new_tensor_2d(ctx, ts[i].type, kCols, kRows);
    ggml_set_name(t, ts[i].name);
    memcpy(t->data, ts[i].data, ggml_nbytes(t));
    gguf_add_tensor(g, t);
  }
  if (!gguf_write_to_file(g, argv[1], false)) return 1;
  printf("wrote %s (%zu MXFP4 bytes)\n", argv[1], qbytes);
  return 0;
}
