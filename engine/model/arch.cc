#include "engine/model/arch.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/families/families.h"

namespace textgen {

absl::Span<const ArchSpec> AllArchitectures() {
  // The registry: one line per family file (engine/model/families/).
  // clang-format off
  static const ArchSpec kArchs[] = {
      families::Llama(),
      families::Qwen2(),
      families::Qwen3(),
      families::Phi3(),
      families::Gemma2(),
      families::Gemma3(),
      families::Olmo2(),
      families::Qwen3Moe(),
      families::Qwen2Moe(),
      families::GptOss(),
  };
  // clang-format on
  return kArchs;
}

const ArchSpec* FindArchByGguf(std::string_view name) {
  for (const ArchSpec& a : AllArchitectures()) {
    if (name == a.gguf_arch) return &a;
  }
  return nullptr;
}

const ArchSpec* FindArchByHfType(std::string_view model_type) {
  for (const ArchSpec& a : AllArchitectures()) {
    for (const char* type : a.hf_types) {
      if (model_type == type) return &a;
    }
  }
  return nullptr;
}

std::string SupportedArchitectures() {
  std::vector<std::string> names;
  for (const ArchSpec& a : AllArchitectures()) names.push_back(a.gguf_arch);
  return absl::StrJoin(names, ", ");
}

std::string ArchitectureTable() {
  std::string out =
      "| architecture (GGUF `general.architecture` / HF `model_type`) | models | what differs "
      "from Llama |\n|---|---|---|\n";
  for (const ArchSpec& a : AllArchitectures()) {
    for (const ArchDoc& doc : a.docs) {
      std::string hf = "— (GGUF only)";
      if (doc.hf != nullptr) {
        hf = doc.hf;
      } else if (!doc.gguf_only && !a.hf_types.empty()) {
        std::vector<std::string> types;
        for (const char* t : a.hf_types) types.push_back(absl::StrCat("`", t, "`"));
        hf = absl::StrJoin(types, ", ");
      }
      absl::StrAppend(&out, "| `", a.gguf_arch, "`", doc.variant, " / ", hf, " | ", doc.models,
                      " | ", doc.differs, " |\n");
    }
  }
  return out;
}

}  // namespace textgen
