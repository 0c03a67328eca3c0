// Safetensors reader on arbitrary bytes: open, then every tensor checked against the file's
// bounds, looked up by name and its first row (last dimension) converted to F32.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "engine/format/safetensors_file.h"
#include "fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace textgen;
  static fuzz::FuzzFile* file = new fuzz::FuzzFile("safetensors");
  file->Write(data, size);
  auto st = SafetensorsFile::Open(file->path());
  if (!st.ok()) return 0;
  for (const SafetensorsTensor& t : (*st)->tensors()) {
    if ((*st)->FindTensor(t.name) != &t) std::abort();
    if (t.num_bytes > size) std::abort();
    if (t.num_elements == 0) continue;
    const int64_t row = t.shape.empty() ? 1 : t.shape.back();
    std::vector<float> out(static_cast<size_t>(row));
    ToF32(t.type, t.data, out.data(), row);
  }
  for (const auto& [key, value] : (*st)->metadata()) (void)value.size();
  return 0;
}
