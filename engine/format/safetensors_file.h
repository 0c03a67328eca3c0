// Safetensors reader: memory-mapped, F32/F16/BF16 tensors, header validated against the file.
// Format: https://github.com/huggingface/safetensors (uint64 LE header length N, N bytes of
// JSON, then the data section that data_offsets are relative to).
#ifndef TEXTGEN_ENGINE_FORMAT_SAFETENSORS_FILE_H_
#define TEXTGEN_ENGINE_FORMAT_SAFETENSORS_FILE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/format/dtype.h"
#include "engine/util/mapped_file.h"

namespace textgen {

struct SafetensorsTensor {
  std::string name;
  DType type = DType::kF32;
  // Safetensors (row-major) order: shape[0] is outermost; a [out, in] matrix has shape
  // {out, in}. Empty for a scalar.
  std::vector<int64_t> shape;
  int64_t num_elements = 0;
  // Into the mapping; valid while the SafetensorsFile lives. Not necessarily aligned for the
  // element type (the header length is arbitrary), so read through memcpy or ToF32.
  const uint8_t* data = nullptr;
  size_t num_bytes = 0;
};

// Immutable after Open; thread-safe for concurrent reads.
class SafetensorsFile {
 public:
  // Errors name the problem and the file. InvalidArgument: file shorter than 8 bytes, header
  // length beyond the file, JSON that does not parse or is not an object, an entry missing or
  // with malformed dtype/shape/data_offsets, offsets out of the data section or not matching
  // shape x dtype size, unknown dtype. Unimplemented: a real safetensors dtype other than
  // F32/F16/BF16 (names the dtype and tensor). MappedFile errors pass through.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  // In data-offset order (the order they lie in the file).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // nullptr when absent.
  const SafetensorsTensor* FindTensor(const std::string& name) const;
  // "__metadata__" (string to string); non-string values are kept as their JSON text.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  absl::Status Parse();

  std::unique_ptr<MappedFile> file_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> tensor_index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_FORMAT_SAFETENSORS_FILE_H_
