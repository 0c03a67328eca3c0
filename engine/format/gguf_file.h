// GGUF v3 reader: memory-mapped, every metadata value type, tensor index with bounds checks.
// Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
// Version 2 has the same layout and is accepted too.
#ifndef TEXTGEN_ENGINE_FORMAT_GGUF_FILE_H_
#define TEXTGEN_ENGINE_FORMAT_GGUF_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/format/dtype.h"
#include "engine/util/mapped_file.h"

namespace textgen {

// GGUF metadata value types, numbered as in the file format.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint32", "string", "array", ...; "invalid" for values outside the enum.
const char* GgufValueTypeName(GgufValueType type);

// One metadata value. Scalars are widened: unsigned -> uint64_t, signed -> int64_t,
// floats -> double. An array holds elements of `array_type` in `array`.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string> scalar;
  GgufValueType array_type = GgufValueType::kUint8;
  std::vector<GgufValue> array;  // only when type == kArray
};

struct GgufTensorInfo {
  std::string name;
  DType type = DType::kF32;
  // GGUF order: dims[0] varies fastest (the row length); a [out, in] matrix has dims {in, out}.
  std::vector<int64_t> dims;
  int64_t num_elements = 0;
  uint64_t offset = 0;            // relative to the start of the tensor data section
  const uint8_t* data = nullptr;  // into the mapping; valid while the GgufFile lives
  size_t num_bytes = 0;
};

// Immutable after Open; thread-safe for concurrent reads.
class GgufFile {
 public:
  // Errors name the problem and the file. Malformed files give InvalidArgument: bad magic,
  // truncated file, invalid value type, overlong strings or counts that cannot fit in the
  // file, arrays nested deeper than 8, duplicate keys or tensor names, bad general.alignment,
  // n_dims 0 or > 4, dims of 0 or element-count overflow, Q8_0 rows not a multiple of 32,
  // misaligned tensor offsets, tensor data out of bounds. Valid files this engine cannot
  // handle give Unimplemented: version other than 2 or 3, tensor types other than
  // F32/F16/BF16/Q8_0 (the message names the type and tensor). MappedFile errors pass
  // through. Never reads outside the mapping.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  // Absolute file offset of the tensor data section (header end rounded up to alignment).
  uint64_t data_offset() const { return data_offset_; }
  const std::string& path() const { return file_->path(); }

  bool Has(const std::string& key) const { return metadata_.count(key) > 0; }
  const GgufValue* Find(const std::string& key) const;
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }

  // Typed getters: NotFound if the key is absent, InvalidArgument if the type does not fit
  // (any integer type converts to integers when the value is in range; float32/64 and
  // integers to double). Array getters need a flat array of a fitting element type.
  absl::StatusOr<std::string> GetString(const std::string& key) const;
  absl::StatusOr<uint64_t> GetUint(const std::string& key) const;
  absl::StatusOr<int64_t> GetInt(const std::string& key) const;
  absl::StatusOr<double> GetFloat(const std::string& key) const;
  absl::StatusOr<bool> GetBool(const std::string& key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(const std::string& key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(const std::string& key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent.
  const GgufTensorInfo* FindTensor(const std::string& name) const;

 private:
  friend class GgufParser;
  GgufFile() = default;
  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_FORMAT_GGUF_FILE_H_
