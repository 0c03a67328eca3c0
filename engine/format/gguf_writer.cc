#include "engine/format/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint32_t kDefaultAlignment = 32;

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void PutString(std::string* out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}

template <typename T>
absl::Status PutUnsigned(std::string* out, const GgufValue& v) {
  const uint64_t* x = std::get_if<uint64_t>(&v.scalar);
  if (x == nullptr || *x > std::numeric_limits<T>::max()) {
    return absl::InvalidArgumentError("value does not fit");
  }
  Put<T>(out, static_cast<T>(*x));
  return absl::OkStatus();
}

template <typename T>
absl::Status PutSigned(std::string* out, const GgufValue& v) {
  const int64_t* x = std::get_if<int64_t>(&v.scalar);
  if (x == nullptr || *x > std::numeric_limits<T>::max() || *x < std::numeric_limits<T>::min()) {
    return absl::InvalidArgumentError("value does not fit");
  }
  Put<T>(out, static_cast<T>(*x));
  return absl::OkStatus();
}

// Serializes the value body (without its type tag, which the caller writes).
absl::Status PutValue(std::string* out, const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::kUint8:
      return PutUnsigned<uint8_t>(out, v);
    case GgufValueType::kUint16:
      return PutUnsigned<uint16_t>(out, v);
    case GgufValueType::kUint32:
      return PutUnsigned<uint32_t>(out, v);
    case GgufValueType::kUint64:
      return PutUnsigned<uint64_t>(out, v);
    case GgufValueType::kInt8:
      return PutSigned<int8_t>(out, v);
    case GgufValueType::kInt16:
      return PutSigned<int16_t>(out, v);
    case GgufValueType::kInt32:
      return PutSigned<int32_t>(out, v);
    case GgufValueType::kInt64:
      return PutSigned<int64_t>(out, v);
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: {
      const double* x = std::get_if<double>(&v.scalar);
      if (x == nullptr) return absl::InvalidArgumentError("value is not a float");
      if (v.type == GgufValueType::kFloat32) {
        Put<float>(out, static_cast<float>(*x));
      } else {
        Put<double>(out, *x);
      }
      return absl::OkStatus();
    }
    case GgufValueType::kBool: {
      const bool* x = std::get_if<bool>(&v.scalar);
      if (x == nullptr) return absl::InvalidArgumentError("value is not a bool");
      Put<uint8_t>(out, *x ? 1 : 0);
      return absl::OkStatus();
    }
    case GgufValueType::kString: {
      const std::string* x = std::get_if<std::string>(&v.scalar);
      if (x == nullptr) return absl::InvalidArgumentError("value is not a string");
      PutString(out, *x);
      return absl::OkStatus();
    }
    case GgufValueType::kArray:
      Put<uint32_t>(out, static_cast<uint32_t>(v.array_type));
      Put<uint64_t>(out, v.array.size());
      for (size_t i = 0; i < v.array.size(); ++i) {
        if (v.array[i].type != v.array_type) {
          return absl::InvalidArgumentError(
              absl::StrCat("array element ", i, " is ", GgufValueTypeName(v.array[i].type),
                           ", expected ", GgufValueTypeName(v.array_type)));
        }
        TG_RETURN_IF_ERROR(PutValue(out, v.array[i]));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("invalid value type ", static_cast<uint32_t>(v.type)));
}

class StringSink : public GgufTensorSink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  absl::Status Append(const void* data, size_t n) override {
    out_->append(static_cast<const char*>(data), n);
    return absl::OkStatus();
  }

 private:
  std::string* out_;
};

class FileSink : public GgufTensorSink {
 public:
  FileSink(FILE* f, const std::string& path) : f_(f), path_(path) {}
  absl::Status Append(const void* data, size_t n) override {
    if (n > 0 && std::fwrite(data, 1, n, f_) != n) {
      return absl::InternalError(absl::StrCat("write failed: ", path_, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }

 private:
  FILE* f_;
  const std::string& path_;
};

// Passes a filler's bytes through while making sure it writes exactly the tensor's size.
class CountingSink : public GgufTensorSink {
 public:
  CountingSink(GgufTensorSink& out, const std::string& name, size_t expected)
      : out_(out), name_(name), expected_(expected) {}
  absl::Status Append(const void* data, size_t n) override {
    if (n > expected_ - written_) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name_, "': filler wrote more than ", expected_, " bytes"));
    }
    written_ += n;
    return out_.Append(data, n);
  }
  size_t written() const { return written_; }

 private:
  GgufTensorSink& out_;
  const std::string& name_;
  size_t expected_;
  size_t written_ = 0;
};

absl::Status PutZeros(GgufTensorSink& out, size_t n) {
  static constexpr char kZeros[256] = {};
  while (n > 0) {
    size_t k = n < sizeof(kZeros) ? n : sizeof(kZeros);
    TG_RETURN_IF_ERROR(out.Append(kZeros, k));
    n -= k;
  }
  return absl::OkStatus();
}

}  // namespace

GgufValue GgufUint(GgufValueType type, uint64_t v) {
  GgufValue out;
  out.type = type;
  out.scalar = v;
  return out;
}

GgufValue GgufInt(GgufValueType type, int64_t v) {
  GgufValue out;
  out.type = type;
  out.scalar = v;
  return out;
}

GgufValue GgufFloat(GgufValueType type, double v) {
  GgufValue out;
  out.type = type;
  out.scalar = v;
  return out;
}

GgufValue GgufBool(bool v) {
  GgufValue out;
  out.type = GgufValueType::kBool;
  out.scalar = v;
  return out;
}

GgufValue GgufString(std::string v) {
  GgufValue out;
  out.type = GgufValueType::kString;
  out.scalar = std::move(v);
  return out;
}

GgufValue GgufArray(GgufValueType elem_type, std::vector<GgufValue> elems) {
  GgufValue out;
  out.type = GgufValueType::kArray;
  out.array_type = elem_type;
  out.array = std::move(elems);
  return out;
}

absl::Status GgufWriter::SetAlignment(uint32_t alignment) {
  if (alignment == 0 || alignment > (1u << 30) || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF alignment must be a power of two up to 2^30, got ", alignment));
  }
  if (!tensors_.empty()) {
    return absl::FailedPreconditionError("SetAlignment must come before AddTensor");
  }
  alignment_ = alignment;
  if (alignment != kDefaultAlignment) {
    SetUint32("general.alignment", alignment);
  } else if (auto it = metadata_index_.find("general.alignment"); it != metadata_index_.end()) {
    metadata_[it->second].second = GgufUint(GgufValueType::kUint32, alignment);
  }
  return absl::OkStatus();
}

void GgufWriter::Set(const std::string& key, GgufValue value) {
  auto [it, inserted] = metadata_index_.try_emplace(key, metadata_.size());
  if (inserted) {
    metadata_.emplace_back(key, std::move(value));
  } else {
    metadata_[it->second].second = std::move(value);
  }
}

void GgufWriter::SetUint8(const std::string& key, uint8_t v) {
  Set(key, GgufUint(GgufValueType::kUint8, v));
}
void GgufWriter::SetInt8(const std::string& key, int8_t v) {
  Set(key, GgufInt(GgufValueType::kInt8, v));
}
void GgufWriter::SetUint16(const std::string& key, uint16_t v) {
  Set(key, GgufUint(GgufValueType::kUint16, v));
}
void GgufWriter::SetInt16(const std::string& key, int16_t v) {
  Set(key, GgufInt(GgufValueType::kInt16, v));
}
void GgufWriter::SetUint32(const std::string& key, uint32_t v) {
  Set(key, GgufUint(GgufValueType::kUint32, v));
}
void GgufWriter::SetInt32(const std::string& key, int32_t v) {
  Set(key, GgufInt(GgufValueType::kInt32, v));
}
void GgufWriter::SetUint64(const std::string& key, uint64_t v) {
  Set(key, GgufUint(GgufValueType::kUint64, v));
}
void GgufWriter::SetInt64(const std::string& key, int64_t v) {
  Set(key, GgufInt(GgufValueType::kInt64, v));
}
void GgufWriter::SetFloat32(const std::string& key, float v) {
  Set(key, GgufFloat(GgufValueType::kFloat32, v));
}
void GgufWriter::SetFloat64(const std::string& key, double v) {
  Set(key, GgufFloat(GgufValueType::kFloat64, v));
}
void GgufWriter::SetBool(const std::string& key, bool v) { Set(key, GgufBool(v)); }
void GgufWriter::SetString(const std::string& key, std::string v) {
  Set(key, GgufString(std::move(v)));
}

void GgufWriter::SetStringArray(const std::string& key, absl::Span<const std::string> v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (const std::string& s : v) elems.push_back(GgufString(s));
  Set(key, GgufArray(GgufValueType::kString, std::move(elems)));
}

void GgufWriter::SetInt32Array(const std::string& key, absl::Span<const int32_t> v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (int32_t x : v) elems.push_back(GgufInt(GgufValueType::kInt32, x));
  Set(key, GgufArray(GgufValueType::kInt32, std::move(elems)));
}

void GgufWriter::SetFloat32Array(const std::string& key, absl::Span<const float> v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (float x : v) elems.push_back(GgufFloat(GgufValueType::kFloat32, x));
  Set(key, GgufArray(GgufValueType::kFloat32, std::move(elems)));
}

absl::StatusOr<size_t> GgufWriter::CheckTensor(const std::string& name, DType type,
                                               const std::vector<int64_t>& dims) const {
  if (name.empty()) return absl::InvalidArgumentError("GGUF tensor name is empty");
  if (tensor_index_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("duplicate GGUF tensor name '", name, "'"));
  }
  if (dims.empty() || dims.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "': ", dims.size(), " dims, GGUF allows 1..4"));
  }
  uint64_t rows = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name, "': dimension ", i, " is ", dims[i]));
    }
    if (i > 0 && __builtin_mul_overflow(rows, static_cast<uint64_t>(dims[i]), &rows)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': size overflows"));
    }
  }
  absl::StatusOr<size_t> row_bytes = RowBytes(type, dims[0]);
  if (!row_bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "': ", row_bytes.status().message()));
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(uint64_t{*row_bytes}, rows, &bytes) ||
      bytes > std::numeric_limits<size_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': size overflows"));
  }
  return static_cast<size_t>(bytes);
}

void GgufWriter::PushTensor(Tensor t) {
  t.offset = AlignUp(data_size_, alignment_);
  data_size_ = t.offset + t.num_bytes;
  tensor_index_[t.name] = tensors_.size();
  tensors_.push_back(std::move(t));
}

absl::Status GgufWriter::AddTensor(const std::string& name, DType type, std::vector<int64_t> dims,
                                   absl::Span<const uint8_t> bytes) {
  TG_ASSIGN_OR_RETURN(size_t num_bytes, CheckTensor(name, type, dims));
  if (bytes.size() != num_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': got ", bytes.size(),
                                                   " bytes, ", std::string(DTypeName(type)),
                                                   " shape needs ", num_bytes));
  }
  PushTensor(Tensor{name, type, std::move(dims), 0, num_bytes,
                    std::vector<uint8_t>(bytes.begin(), bytes.end()), nullptr});
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensor(const std::string& name, DType type, std::vector<int64_t> dims,
                                   GgufTensorFiller fill) {
  if (!fill) return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': no filler"));
  TG_ASSIGN_OR_RETURN(size_t num_bytes, CheckTensor(name, type, dims));
  PushTensor(Tensor{name, type, std::move(dims), 0, num_bytes, {}, std::move(fill)});
  return absl::OkStatus();
}

absl::StatusOr<std::string> GgufWriter::Header() const {
  std::string out;
  out.append("GGUF", 4);
  Put<uint32_t>(&out, kVersion);
  Put<uint64_t>(&out, tensors_.size());
  Put<uint64_t>(&out, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    PutString(&out, key);
    Put<uint32_t>(&out, static_cast<uint32_t>(value.type));
    absl::Status s = PutValue(&out, value);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata '", key, "' (", GgufValueTypeName(value.type), "): ", s.message()));
    }
  }
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Put<uint64_t>(&out, static_cast<uint64_t>(d));
    Put<uint32_t>(&out, GgmlTypeOf(t.type));
    Put<uint64_t>(&out, t.offset);
  }
  out.resize(AlignUp(out.size(), alignment_), '\0');
  return out;
}

absl::Status GgufWriter::WriteTo(GgufTensorSink& out) const {
  TG_ASSIGN_OR_RETURN(std::string header, Header());
  TG_RETURN_IF_ERROR(out.Append(header.data(), header.size()));
  uint64_t pos = 0;  // within the data section
  for (const Tensor& t : tensors_) {
    TG_RETURN_IF_ERROR(PutZeros(out, t.offset - pos));
    if (t.fill) {
      CountingSink counting(out, t.name, t.num_bytes);
      TG_RETURN_IF_ERROR(t.fill(counting));
      if (counting.written() != t.num_bytes) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "': filler wrote ",
                                                       counting.written(), " of ", t.num_bytes,
                                                       " bytes"));
      }
    } else {
      TG_RETURN_IF_ERROR(out.Append(t.bytes.data(), t.bytes.size()));
    }
    pos = t.offset + t.num_bytes;
  }
  // Pad the last tensor too, as ggml does, so every tensor occupies a whole aligned slot.
  return PutZeros(out, AlignUp(pos, alignment_) - pos);
}

absl::StatusOr<std::string> GgufWriter::WriteToString() const {
  std::string out;
  StringSink sink(&out);
  TG_RETURN_IF_ERROR(WriteTo(sink));
  return out;
}

absl::Status GgufWriter::Write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  }
  // Large buffer: tensor fillers may append in small pieces.
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
  FileSink sink(f, tmp);
  absl::Status status = WriteTo(sink);
  if (std::fclose(f) != 0 && status.ok()) {
    status = absl::InternalError(absl::StrCat("write failed: ", tmp, ": ", std::strerror(errno)));
  }
  if (status.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    status = absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno)));
  }
  if (!status.ok()) std::remove(tmp.c_str());
  return status;
}

}  // namespace textgen
