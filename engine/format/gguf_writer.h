// Writes GGUF v3 files: metadata of every type, tensors copied from memory or streamed from a
// callback so that multi-GB files never sit in memory twice.
#ifndef TEXTGEN_ENGINE_FORMAT_GGUF_WRITER_H_
#define TEXTGEN_ENGINE_FORMAT_GGUF_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/format/dtype.h"
#include "engine/format/gguf_file.h"

namespace textgen {

// Builders for metadata values, widened as GgufValue stores them. The writer checks at Write
// time that each value fits its declared type (e.g. 300 does not fit kUint8).
GgufValue GgufUint(GgufValueType type, uint64_t v);  // kUint8/16/32/64
GgufValue GgufInt(GgufValueType type, int64_t v);    // kInt8/16/32/64
GgufValue GgufFloat(GgufValueType type, double v);   // kFloat32/64
GgufValue GgufBool(bool v);
GgufValue GgufString(std::string v);
// `elems` must all have type `elem_type`; arrays of arrays are allowed.
GgufValue GgufArray(GgufValueType elem_type, std::vector<GgufValue> elems);

// Receives a streamed tensor's bytes during GgufWriter::Write.
class GgufTensorSink {
 public:
  virtual ~GgufTensorSink() = default;
  virtual absl::Status Append(const void* data, size_t n) = 0;
};
// Must Append exactly the tensor's byte size, in any number of pieces.
using GgufTensorFiller = std::function<absl::Status(GgufTensorSink& sink)>;

// Not thread-safe. Typical use: Set* metadata, AddTensor* in file order, Write.
class GgufWriter {
 public:
  GgufWriter() = default;

  // Power of two in 1..2^30 (default 32). A non-default value is also written as
  // general.alignment (uint32), which is how readers learn it.
  absl::Status SetAlignment(uint32_t alignment);
  uint32_t alignment() const { return alignment_; }

  // Adds a key, or replaces its value in place (keys keep their first position). Setting
  // "general.alignment" here does not change the layout (use SetAlignment); tests rely on
  // that to write inconsistent files.
  void Set(const std::string& key, GgufValue value);
  void SetUint8(const std::string& key, uint8_t v);
  void SetInt8(const std::string& key, int8_t v);
  void SetUint16(const std::string& key, uint16_t v);
  void SetInt16(const std::string& key, int16_t v);
  void SetUint32(const std::string& key, uint32_t v);
  void SetInt32(const std::string& key, int32_t v);
  void SetUint64(const std::string& key, uint64_t v);
  void SetInt64(const std::string& key, int64_t v);
  void SetFloat32(const std::string& key, float v);
  void SetFloat64(const std::string& key, double v);
  void SetBool(const std::string& key, bool v);
  void SetString(const std::string& key, std::string v);
  void SetStringArray(const std::string& key, absl::Span<const std::string> v);
  void SetInt32Array(const std::string& key, absl::Span<const int32_t> v);
  void SetFloat32Array(const std::string& key, absl::Span<const float> v);

  // Adds a tensor; `dims` in GGUF order (dims[0] = row length, fastest varying). Checks the
  // name is new and non-empty, 1..4 positive dims, Q8_0 rows a multiple of 32, and that
  // `bytes` has exactly the tensor's size. Copies `bytes`.
  absl::Status AddTensor(const std::string& name, DType type, std::vector<int64_t> dims,
                         absl::Span<const uint8_t> bytes);
  // Same checks; `fill` is called once during Write to stream the bytes, so nothing is held.
  absl::Status AddTensor(const std::string& name, DType type, std::vector<int64_t> dims,
                         GgufTensorFiller fill);

  // Writes the file via `path`.tmp renamed onto `path`, so a failed or interrupted write never
  // leaves a plausible-looking file. InvalidArgument for metadata that does not fit its type.
  absl::Status Write(const std::string& path) const;
  // The same bytes in memory (for tests and small files).
  absl::StatusOr<std::string> WriteToString() const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> dims;
    uint64_t offset;  // in the data section
    size_t num_bytes;
    std::vector<uint8_t> bytes;  // when copied
    GgufTensorFiller fill;       // when streamed
  };

  absl::StatusOr<size_t> CheckTensor(const std::string& name, DType type,
                                     const std::vector<int64_t>& dims) const;
  void PushTensor(Tensor t);
  absl::StatusOr<std::string> Header() const;
  absl::Status WriteTo(GgufTensorSink& out) const;

  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  absl::flat_hash_map<std::string, size_t> metadata_index_;
  std::vector<Tensor> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
  uint64_t data_size_ = 0;  // end of the last tensor in the data section
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_FORMAT_GGUF_WRITER_H_
