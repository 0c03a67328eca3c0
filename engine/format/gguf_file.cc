#include "engine/format/gguf_file.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
// Arrays of arrays are legal, but each level costs only 12 bytes of file, so without a limit a
// small hostile file could recurse deep enough to overflow the stack.
constexpr int kMaxArrayDepth = 8;
// Smallest possible tensor info: empty name (8) + n_dims (4) + one dim (8) + type (4) +
// offset (8). Bounds tensor_count before anything is reserved.
constexpr size_t kMinTensorInfoBytes = 32;

bool IsValidValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

// Bytes of a fixed-size scalar; 0 for string and array.
size_t ScalarBytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

// Fewest bytes one value of type `t` can occupy; used to reject counts that cannot fit.
size_t MinValueBytes(GgufValueType t) {
  if (t == GgufValueType::kString) return 8;  // length only
  if (t == GgufValueType::kArray) return 12;  // element type + count
  return ScalarBytes(t);
}

bool IsUnsigned(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 || t == GgufValueType::kUint32 ||
         t == GgufValueType::kUint64;
}
bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kInt64;
}
bool IsFloat(GgufValueType t) {
  return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
}

// Integer value of an integer-typed scalar; int128 holds every uint64 and int64 exactly.
bool IntegerOf(const GgufValue& v, __int128* out) {
  if (IsUnsigned(v.type)) {
    *out = std::get<uint64_t>(v.scalar);
    return true;
  }
  if (IsSigned(v.type)) {
    *out = std::get<int64_t>(v.scalar);
    return true;
  }
  return false;
}

}  // namespace

const char* GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "invalid";
}

// Reads a mapped GGUF file into a GgufFile. Every read goes through Need(), which checks the
// remaining bytes first, so no byte outside [data, data + size) is ever touched.
class GgufParser {
 public:
  explicit GgufParser(const MappedFile& file)
      : p_(file.data()), size_(file.size()), path_(file.path()) {}

  absl::Status Parse(GgufFile* out) {
    TG_RETURN_IF_ERROR(Need(4, "magic"));
    if (std::memcmp(p_, "GGUF", 4) != 0) {
      return Invalid(absl::StrCat("bad magic: not a GGUF file (first bytes ", Hex(p_, 4),
                                  ", expected \"GGUF\")"));
    }
    pos_ = 4;
    uint32_t version = 0;
    TG_RETURN_IF_ERROR(Read(&version, "version"));
    if (version != 2 && version != 3) {
      std::string hint = (version & 0xffff) == 0 && version != 0 ? " (big-endian file?)" : "";
      return absl::UnimplementedError(
          absl::StrCat(path_, ": unsupported GGUF version ", version, hint, "; supported: 2, 3"));
    }
    out->version_ = version;
    uint64_t tensor_count = 0;
    uint64_t kv_count = 0;
    TG_RETURN_IF_ERROR(Read(&tensor_count, "tensor_count"));
    TG_RETURN_IF_ERROR(Read(&kv_count, "kv_count"));
    // A key/value pair is at least key length (8) + value type (4) + a 1-byte value.
    if (kv_count > Remaining() / 13) {
      return Invalid(absl::StrCat("kv_count ", kv_count, " cannot fit in the remaining ",
                                  Remaining(), " bytes (truncated or corrupt file)"));
    }
    for (uint64_t i = 0; i < kv_count; ++i) TG_RETURN_IF_ERROR(ParseKeyValue(i, out));
    TG_RETURN_IF_ERROR(ParseAlignment(out));

    if (tensor_count > Remaining() / kMinTensorInfoBytes) {
      return Invalid(absl::StrCat("tensor_count ", tensor_count, " cannot fit in the remaining ",
                                  Remaining(), " bytes (truncated or corrupt file)"));
    }
    out->tensors_.reserve(tensor_count);
    for (uint64_t i = 0; i < tensor_count; ++i) TG_RETURN_IF_ERROR(ParseTensorInfo(i, out));

    // The data section starts at the next multiple of the alignment. A file without tensors
    // may end right after the header (llama.cpp's vocab-only files do), so that is not checked.
    const uint64_t align = out->alignment_;
    out->data_offset_ = (pos_ + align - 1) / align * align;
    for (GgufTensorInfo& t : out->tensors_) TG_RETURN_IF_ERROR(PlaceTensor(out, &t));
    return absl::OkStatus();
  }

 private:
  size_t Remaining() const { return size_ - pos_; }

  absl::Status Invalid(absl::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", msg));
  }

  static std::string Hex(const uint8_t* p, size_t n) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) {
      s += kDigits[p[i] >> 4];
      s += kDigits[p[i] & 15];
    }
    return s;
  }

  // `what` is only formatted on failure, so callers pass cheap views.
  absl::Status Need(uint64_t n, absl::string_view what) const {
    if (n <= Remaining()) return absl::OkStatus();
    return Invalid(absl::StrCat("truncated file: ", what, " needs ", n, " bytes at offset ", pos_,
                                " but only ", Remaining(), " remain (file size ", size_, ")"));
  }

  template <typename T>
  absl::Status Read(T* v, absl::string_view what) {
    TG_RETURN_IF_ERROR(Need(sizeof(T), what));
    std::memcpy(v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  // A GGUF string: uint64 length, then that many bytes (not NUL-terminated).
  absl::Status ReadString(std::string* s, absl::string_view what) {
    uint64_t len = 0;
    TG_RETURN_IF_ERROR(Read(&len, what));
    if (len > Remaining()) {
      return Invalid(absl::StrCat(what, ": string length ", len, " at offset ", pos_ - 8,
                                  " exceeds the remaining ", Remaining(),
                                  " bytes (truncated or corrupt file)"));
    }
    s->assign(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }

  absl::Status ReadValueType(GgufValueType* t, absl::string_view what) {
    uint32_t raw = 0;
    TG_RETURN_IF_ERROR(Read(&raw, what));
    if (!IsValidValueType(raw)) {
      return Invalid(absl::StrCat(what, ": invalid value type ", raw, " at offset ", pos_ - 4,
                                  " (valid: 0..12)"));
    }
    *t = static_cast<GgufValueType>(raw);
    return absl::OkStatus();
  }

  absl::Status ParseKeyValue(uint64_t index, GgufFile* out) {
    std::string key;
    TG_RETURN_IF_ERROR(ReadString(&key, absl::StrCat("key of metadata entry ", index)));
    const std::string what = absl::StrCat("metadata '", key, "'");
    GgufValueType type;
    TG_RETURN_IF_ERROR(ReadValueType(&type, what));
    auto [it, inserted] = out->metadata_.try_emplace(std::move(key));
    if (!inserted) return Invalid(absl::StrCat("duplicate metadata key '", it->first, "'"));
    return ReadValue(type, 0, what, &it->second);
  }

  absl::Status ReadValue(GgufValueType type, int depth, absl::string_view what, GgufValue* v) {
    v->type = type;
    switch (type) {
      case GgufValueType::kUint8:
        return ReadScalar<uint8_t, uint64_t>(what, v);
      case GgufValueType::kUint16:
        return ReadScalar<uint16_t, uint64_t>(what, v);
      case GgufValueType::kUint32:
        return ReadScalar<uint32_t, uint64_t>(what, v);
      case GgufValueType::kUint64:
        return ReadScalar<uint64_t, uint64_t>(what, v);
      case GgufValueType::kInt8:
        return ReadScalar<int8_t, int64_t>(what, v);
      case GgufValueType::kInt16:
        return ReadScalar<int16_t, int64_t>(what, v);
      case GgufValueType::kInt32:
        return ReadScalar<int32_t, int64_t>(what, v);
      case GgufValueType::kInt64:
        return ReadScalar<int64_t, int64_t>(what, v);
      case GgufValueType::kFloat32:
        return ReadScalar<float, double>(what, v);
      case GgufValueType::kFloat64:
        return ReadScalar<double, double>(what, v);
      case GgufValueType::kBool: {
        uint8_t b = 0;
        TG_RETURN_IF_ERROR(Read(&b, what));
        v->scalar = b != 0;  // lenient like ggml: any nonzero byte is true
        return absl::OkStatus();
      }
      case GgufValueType::kString: {
        std::string s;
        TG_RETURN_IF_ERROR(ReadString(&s, what));
        v->scalar = std::move(s);
        return absl::OkStatus();
      }
      case GgufValueType::kArray:
        return ReadArray(depth, what, v);
    }
    return Invalid(absl::StrCat(what, ": invalid value type"));  // unreachable
  }

  template <typename Stored, typename Wide>
  absl::Status ReadScalar(absl::string_view what, GgufValue* v) {
    Stored x;
    TG_RETURN_IF_ERROR(Read(&x, what));
    v->scalar = static_cast<Wide>(x);
    return absl::OkStatus();
  }

  absl::Status ReadArray(int depth, absl::string_view what, GgufValue* v) {
    if (depth >= kMaxArrayDepth) {
      return Invalid(
          absl::StrCat(what, ": arrays nested deeper than ", kMaxArrayDepth, " at offset ", pos_));
    }
    GgufValueType elem_type;
    TG_RETURN_IF_ERROR(ReadValueType(&elem_type, what));
    uint64_t count = 0;
    TG_RETURN_IF_ERROR(Read(&count, what));
    if (count > Remaining() / MinValueBytes(elem_type)) {
      return Invalid(absl::StrCat(what, ": array count ", count, " of ",
                                  GgufValueTypeName(elem_type), " at offset ", pos_ - 8,
                                  " cannot fit in the remaining ", Remaining(),
                                  " bytes (truncated or corrupt file)"));
    }
    v->array_type = elem_type;
    // Safe to allocate: the check above bounds `count` by the file size.
    v->array.resize(count);
    for (GgufValue& e : v->array) TG_RETURN_IF_ERROR(ReadValue(elem_type, depth + 1, what, &e));
    return absl::OkStatus();
  }

  absl::Status ParseAlignment(GgufFile* out) {
    const GgufValue* v = out->Find("general.alignment");
    if (v == nullptr) {
      out->alignment_ = kDefaultAlignment;
      return absl::OkStatus();
    }
    __int128 a = 0;
    if (!IntegerOf(*v, &a)) {
      return Invalid(
          absl::StrCat("general.alignment must be an integer, got ", GgufValueTypeName(v->type)));
    }
    if (a <= 0 || a > (1 << 30) || (a & (a - 1)) != 0) {
      std::string got =
          a < 0 ? absl::StrCat(static_cast<int64_t>(a)) : absl::StrCat(static_cast<uint64_t>(a));
      return Invalid(
          absl::StrCat("general.alignment must be a power of two up to 2^30, got ", got));
    }
    out->alignment_ = static_cast<uint32_t>(a);
    return absl::OkStatus();
  }

  absl::Status ParseTensorInfo(uint64_t index, GgufFile* out) {
    GgufTensorInfo t;
    TG_RETURN_IF_ERROR(ReadString(&t.name, absl::StrCat("name of tensor info ", index)));
    const std::string what = absl::StrCat("tensor '", t.name, "'");
    uint32_t n_dims = 0;
    TG_RETURN_IF_ERROR(Read(&n_dims, what));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Invalid(absl::StrCat(what, ": n_dims ", n_dims, " is not in 1..", kMaxDims));
    }
    t.dims.resize(n_dims);
    int64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      TG_RETURN_IF_ERROR(Read(&dim, what));
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Invalid(
            absl::StrCat(what, ": dimension ", d, " is ", dim, ", must be in 1..2^63-1"));
      }
      t.dims[d] = static_cast<int64_t>(dim);
      if (__builtin_mul_overflow(n, t.dims[d], &n)) {
        return Invalid(absl::StrCat(what, ": element count overflows int64"));
      }
    }
    t.num_elements = n;
    uint32_t ggml_type = 0;
    TG_RETURN_IF_ERROR(Read(&ggml_type, what));
    absl::StatusOr<DType> type = DTypeFromGgmlType(ggml_type);
    if (!type.ok()) {
      return absl::Status(type.status().code(),
                          absl::StrCat(path_, ": ", what, ": ", type.status().message()));
    }
    t.type = *type;
    TG_RETURN_IF_ERROR(Read(&t.offset, what));
    absl::StatusOr<size_t> row_bytes = RowBytes(t.type, t.dims[0]);
    if (!row_bytes.ok()) {
      return Invalid(absl::StrCat(what, ": ", row_bytes.status().message()));
    }
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(*row_bytes),
                               static_cast<uint64_t>(n / t.dims[0]), &bytes) ||
        bytes > std::numeric_limits<size_t>::max()) {
      return Invalid(absl::StrCat(what, ": byte size overflows"));
    }
    t.num_bytes = static_cast<size_t>(bytes);
    auto [it, inserted] = out->tensor_index_.try_emplace(t.name, out->tensors_.size());
    if (!inserted) return Invalid(absl::StrCat("duplicate tensor name '", t.name, "'"));
    out->tensors_.push_back(std::move(t));
    return absl::OkStatus();
  }

  absl::Status PlaceTensor(const GgufFile* out, GgufTensorInfo* t) const {
    if (t->offset % out->alignment_ != 0) {
      return Invalid(absl::StrCat("tensor '", t->name, "': offset ", t->offset,
                                  " is not a multiple of the alignment ", out->alignment_));
    }
    const uint64_t start = out->data_offset_;
    if (start > size_ || t->offset > size_ - start || t->num_bytes > size_ - start - t->offset) {
      return Invalid(absl::StrCat("tensor '", t->name, "': data out of bounds: ", t->num_bytes,
                                  " bytes at offset ", t->offset, " of the data section (which",
                                  " starts at ", start, ") but the file has ", size_,
                                  " bytes (truncated or corrupt file)"));
    }
    t->data = p_ + start + t->offset;
    return absl::OkStatus();
  }

  const uint8_t* p_;
  size_t size_;
  const std::string& path_;
  size_t pos_ = 0;
};

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  std::unique_ptr<GgufFile> gguf(new GgufFile());
  TG_RETURN_IF_ERROR(GgufParser(*file).Parse(gguf.get()));
  gguf->file_ = std::move(file);
  return gguf;
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

absl::Status WrongType(const std::string& path, const std::string& key, const GgufValue& v,
                       absl::string_view expected) {
  std::string actual(GgufValueTypeName(v.type));
  if (v.type == GgufValueType::kArray) {
    absl::StrAppend(&actual, " of ", GgufValueTypeName(v.array_type));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": metadata '", key, "' is ", actual, ", expected ", expected));
}

absl::StatusOr<int64_t> ToInt(const GgufValue& v) {
  __int128 x = 0;
  if (!IntegerOf(v, &x)) return absl::InvalidArgumentError("not an integer");
  if (x > std::numeric_limits<int64_t>::max()) {
    return absl::OutOfRangeError("value does not fit int64");
  }
  return static_cast<int64_t>(x);
}

absl::StatusOr<double> ToDouble(const GgufValue& v) {
  if (IsFloat(v.type)) return std::get<double>(v.scalar);
  __int128 x = 0;
  if (IntegerOf(v, &x)) return static_cast<double>(x);
  return absl::InvalidArgumentError("not a number");
}

}  // namespace

absl::StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(path(), ": no metadata '", key, "'"));
  if (v->type != GgufValueType::kString) return WrongType(path(), key, *v, "string");
  return std::get<std::string>(v->scalar);
}

absl::StatusOr<uint64_t> GgufFile::GetUint(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(path(), ": no metadata '", key, "'"));
  __int128 x = 0;
  if (!IntegerOf(*v, &x)) return WrongType(path(), key, *v, "an unsigned integer");
  if (x < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path(), ": metadata '", key, "' is negative (",
                                                   static_cast<int64_t>(x),
                                                   "), expected an unsigned integer"));
  }
  return static_cast<uint64_t>(x);
}

absl::StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(path(), ": no metadata '", key, "'"));
  absl::StatusOr<int64_t> x = ToInt(*v);
  if (!x.ok()) return WrongType(path(), key, *v, "an integer that fits int64");
  return *x;
}

absl::StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(path(), ": no metadata '", key, "'"));
  absl::StatusOr<double> x = ToDouble(*v);
  if (!x.ok()) return WrongType(path(), key, *v, "a number");
  return *x;
}

absl::StatusOr<bool> GgufFile::GetBool(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(path(), ": no metadata '", key, "'"));
  if (v->type != GgufValueType::kBool) return WrongType(path(), key, *v, "bool");
  return std::get<bool>(v->scalar);
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(path(), ": no metadata '", key, "'"));
  if (v->type != GgufValueType::kArray || v->array_type != GgufValueType::kString) {
    return WrongType(path(), key, *v, "array of string");
  }
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) out.push_back(std::get<std::string>(e.scalar));
  return out;
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(path(), ": no metadata '", key, "'"));
  if (v->type != GgufValueType::kArray ||
      !(IsFloat(v->array_type) || IsSigned(v->array_type) || IsUnsigned(v->array_type))) {
    return WrongType(path(), key, *v, "array of numbers");
  }
  std::vector<double> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) out.push_back(*ToDouble(e));
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat(path(), ": no metadata '", key, "'"));
  if (v->type != GgufValueType::kArray || !(IsSigned(v->array_type) || IsUnsigned(v->array_type))) {
    return WrongType(path(), key, *v, "array of integers");
  }
  std::vector<int64_t> out;
  out.reserve(v->array.size());
  for (size_t i = 0; i < v->array.size(); ++i) {
    absl::StatusOr<int64_t> x = ToInt(v->array[i]);
    if (!x.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path(), ": metadata '", key, "' element ", i, " does not fit int64"));
    }
    out.push_back(*x);
  }
  return out;
}

}  // namespace textgen
