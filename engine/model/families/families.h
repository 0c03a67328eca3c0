// One function per model family, each in its own file of this folder: the family's ArchSpec
// (hyper-parameter switches, tensor names in GGUF and Hugging Face checkpoints, what the docs'
// model table says about it). engine/model/arch.cc lists them; adding a family is a new file
// here and one line in that list (plus whatever forward-pass capability it is the first to need).
#ifndef TEXTGEN_ENGINE_MODEL_FAMILIES_FAMILIES_H_
#define TEXTGEN_ENGINE_MODEL_FAMILIES_FAMILIES_H_

#include "engine/model/arch.h"

namespace textgen::families {

ArchSpec Llama();     // llama.cc: Llama, Mistral; Mixtral when the file lists experts
ArchSpec Qwen2();     // qwen2.cc
ArchSpec Qwen3();     // qwen3.cc
ArchSpec Phi3();      // phi3.cc
ArchSpec Gemma2();    // gemma.cc
ArchSpec Gemma3();    // gemma.cc
ArchSpec Olmo2();     // olmo2.cc
ArchSpec Qwen3Moe();  // qwen3moe.cc
ArchSpec Qwen2Moe();  // qwen2moe.cc
ArchSpec GptOss();    // gpt_oss.cc

}  // namespace textgen::families

#endif  // TEXTGEN_ENGINE_MODEL_FAMILIES_FAMILIES_H_
