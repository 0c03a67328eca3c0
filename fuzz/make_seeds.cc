// Writes the generated seed corpora (a few KB each) into OUT_DIR/<target>/: GGUF files made by
// the engine's own GgufWriter (a tiny Llama with an SPM vocab, a byte-level BPE vocab, a file
// with every metadata type), safetensors files and serialized GenerateRequests. Binary seeds
// are generated rather than committed so they follow the writer and the proto.
//
// Usage: make_seeds OUT_DIR
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/format/dtype.h"
#include "engine/format/gguf_writer.h"
#include "engine/util/status_macros.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::fuzz {
namespace {

namespace fs = std::filesystem;

bool Save(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  if (!out) std::fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

std::vector<uint8_t> Bytes(DType type, int64_t n) {
  std::vector<uint8_t> b(*RowBytes(type, n));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 37 + 11);
  if (type == DType::kF32) {  // finite values
    for (int64_t i = 0; i < n; ++i) {
      float f = 0.01f * static_cast<float>(i);
      std::memcpy(b.data() + 4 * i, &f, 4);
    }
  }
  return b;
}

// A Llama of 2 layers, dim 8, 2 heads, with an SPM vocab of byte tokens and a few pieces.
absl::StatusOr<std::string> TinyLlama() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", "fuzz seed");
  w.SetUint32("llama.context_length", 64);
  w.SetUint32("llama.embedding_length", 8);
  w.SetUint32("llama.block_count", 2);
  w.SetUint32("llama.feed_forward_length", 16);
  w.SetUint32("llama.attention.head_count", 2);
  w.SetUint32("llama.attention.head_count_kv", 1);
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; b += 17) {
    char piece[8];
    std::snprintf(piece, sizeof(piece), "<0x%02X>", b);
    tokens.push_back(piece);
    types.push_back(6);
  }
  for (const char* p : {"\xe2\x96\x81", "\xe2\x96\x81t", "he", "\xe2\x96\x81the", "o", "w"}) {
    tokens.push_back(p);
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetFloat32Array("tokenizer.ggml.scores", scores);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetUint32("tokenizer.ggml.bos_token_id", 1);
  w.SetUint32("tokenizer.ggml.eos_token_id", 2);
  w.SetString("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}");
  const int64_t n_vocab = static_cast<int64_t>(tokens.size());
  TG_RETURN_IF_ERROR(
      w.AddTensor("token_embd.weight", DType::kF16, {8, n_vocab}, Bytes(DType::kF16, 8 * n_vocab)));
  TG_RETURN_IF_ERROR(w.AddTensor("output_norm.weight", DType::kF32, {8}, Bytes(DType::kF32, 8)));
  TG_RETURN_IF_ERROR(
      w.AddTensor("blk.0.attn_q.weight", DType::kQ8_0, {32, 2}, Bytes(DType::kQ8_0, 64)));
  TG_RETURN_IF_ERROR(
      w.AddTensor("blk.0.ffn_up.weight", DType::kBf16, {8, 4}, Bytes(DType::kBf16, 32)));
  TG_RETURN_IF_ERROR(
      w.AddTensor("blk.1.ffn_down.weight", DType::kQ4_K, {256}, Bytes(DType::kQ4_K, 256)));
  TG_RETURN_IF_ERROR(w.AddTensor("rope_freqs.weight", DType::kF32, {2}, Bytes(DType::kF32, 2)));
  return w.WriteToString();
}

// Vocab only: byte-level BPE with merges and a pre-tokenizer name.
absl::StatusOr<std::string> BpeVocab(const std::string& pre) {
  GgufWriter w;
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>"};
  std::vector<int32_t> types = {3, 3, 3, 4};
  for (const char* p : {"h", "e", "l", "o", "\xc4\xa0", "w", "r", "d", "1", "2", "he", "ll", "hell",
                        "hello", "\xc4\xa0w", "\xc4\xa0wor", "or", "ld"}) {
    tokens.push_back(p);
    types.push_back(1);
  }
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", pre);
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetStringArray("tokenizer.ggml.merges",
                   std::vector<std::string>{"h e", "l l", "he ll", "hell o", "\xc4\xa0 w", "o r",
                                            "\xc4\xa0w or", "l d"});
  w.SetUint32("tokenizer.ggml.eos_token_id", 0);
  w.SetBool("tokenizer.ggml.add_bos_token", false);
  return w.WriteToString();
}

// Every metadata value type, nested arrays included.
absl::StatusOr<std::string> AllTypes() {
  GgufWriter w;
  w.SetUint8("u8", 200);
  w.SetInt8("i8", -5);
  w.SetUint16("u16", 60000);
  w.SetInt16("i16", -30000);
  w.SetUint32("u32", 4000000000u);
  w.SetInt32("i32", -2000000000);
  w.SetUint64("u64", ~uint64_t{0});
  w.SetInt64("i64", -1);
  w.SetFloat32("f32", 1.5f);
  w.SetFloat64("f64", -2.25);
  w.SetBool("b", true);
  w.SetString("s", "text");
  w.Set("nested", GgufArray(GgufValueType::kArray,
                            {GgufArray(GgufValueType::kUint8, {GgufUint(GgufValueType::kUint8, 1)}),
                             GgufArray(GgufValueType::kString, {GgufString("x")})}));
  TG_RETURN_IF_ERROR(w.SetAlignment(64));
  TG_RETURN_IF_ERROR(w.AddTensor("t", DType::kF32, {2, 2}, Bytes(DType::kF32, 4)));
  return w.WriteToString();
}

std::string Safetensors(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out += header;
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<char>(i * 7));
  return out;
}

void GenerateRequests(const fs::path& dir, bool* ok) {
  v1::GenerateRequest greedy;
  greedy.set_prompt("Once upon a time");
  greedy.set_max_new_tokens(16);
  greedy.add_stop("\n");
  *ok &= Save(dir / "greedy.pb", greedy.SerializeAsString());

  v1::GenerateRequest sample;
  for (int id : {1, 15043, 3186}) sample.add_prompt_ids(id);
  sample.set_method(v1::SAMPLE);
  sample.set_temperature(0.7f);
  sample.set_top_k(40);
  sample.set_top_p(0.9f);
  sample.set_min_p(0.05f);
  sample.set_repetition_penalty(1.1f);
  sample.set_seed(42);
  sample.set_top_logprobs(3);
  sample.set_session_id("s1");
  *ok &= Save(dir / "sample.pb", sample.SerializeAsString());

  v1::GenerateRequest beam;
  beam.set_prompt("x");
  beam.set_method(v1::BEAM);
  beam.set_num_beams(4);
  beam.set_num_return_sequences(2);
  beam.set_length_penalty(0.5f);
  beam.set_early_stopping(v1::NEVER);
  beam.set_context_overflow(v1::CONTEXT_OVERFLOW_SLIDE);
  beam.set_n_keep(4);
  beam.set_use_cache(false);
  beam.set_add_bos(true);
  beam.set_ignore_eos(true);
  *ok &= Save(dir / "beam.pb", beam.SerializeAsString());
}

}  // namespace
}  // namespace textgen::fuzz

int main(int argc, char** argv) {
  using namespace textgen;
  using namespace textgen::fuzz;
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  bool ok = true;
  struct Named {
    const char* name;
    absl::StatusOr<std::string> bytes;
  };
  Named gguf[] = {{"tiny-llama.gguf", TinyLlama()},
                  {"bpe-llama-bpe.gguf", BpeVocab("llama-bpe")},
                  {"bpe-qwen2.gguf", BpeVocab("qwen2")},
                  {"all-types.gguf", AllTypes()}};
  for (Named& g : gguf) {
    if (!g.bytes.ok()) {
      std::fprintf(stderr, "make_seeds: %s: %s\n", g.name,
                   std::string(g.bytes.status().message()).c_str());
      return 1;
    }
    ok &= Save(out / "fuzz_gguf" / g.name, *g.bytes);
  }
  ok &= Save(out / "fuzz_safetensors" / "three.safetensors",
             Safetensors(R"({"__metadata__":{"format":"pt"},)"
                         R"("a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                         R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},)"
                         R"("c":{"dtype":"F16","shape":[],"data_offsets":[22,24]}})",
                         24));
  ok &= Save(out / "fuzz_safetensors" / "empty.safetensors",
             Safetensors(R"({"e":{"dtype":"F32","shape":[0,5],"data_offsets":[0,0]}})", 0));
  GenerateRequests(out / "fuzz_generate_request", &ok);
  return ok ? 0 : 1;
}
