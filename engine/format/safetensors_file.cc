#include "engine/format/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

using nlohmann::json;

// Safetensors dtypes that exist but this engine cannot load; reported as Unimplemented rather
// than as a corrupt file.
constexpr std::string_view kOtherSafetensorsDtypes[] = {
    "BOOL", "U8",      "I8",      "U16",     "I16",  "U32",     "I32",     "U64", "I64",
    "F64",  "F8_E4M3", "F8_E5M2", "F8_E8M0", "E8M0", "F6_E2M3", "F6_E3M2", "F4"};

absl::StatusOr<DType> DTypeFromSafetensors(std::string_view s) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBf16;
  for (std::string_view other : kOtherSafetensorsDtypes) {
    if (s == other) {
      return absl::UnimplementedError(
          absl::StrCat("unsupported dtype ", std::string(s), "; supported: F32, F16, BF16"));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype \"", std::string(s), "\""));
}

size_t ElementBytes(DType t) { return t == DType::kF32 ? 4 : 2; }

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> st(new SafetensorsFile());
  TG_ASSIGN_OR_RETURN(st->file_, MappedFile::Open(path));
  absl::Status status;
  // nlohmann reports type errors by throwing; keep them inside this boundary.
  try {
    status = st->Parse();
  } catch (const std::exception& e) {
    status = absl::InvalidArgumentError(absl::StrCat(path, ": bad safetensors header: ", e.what()));
  }
  if (!status.ok()) return status;
  return st;
}

absl::Status SafetensorsFile::Parse() {
  const std::string& p = file_->path();
  auto invalid = [&p](absl::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat(p, ": ", msg));
  };
  const uint8_t* base = file_->data();
  const size_t size = file_->size();
  if (size < 8) {
    return invalid(
        absl::StrCat("truncated file: ", size, " bytes, too short for the 8-byte header length"));
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, base, 8);
  if (header_len > size - 8) {
    return invalid(absl::StrCat("header length ", header_len, " exceeds the ", size - 8,
                                " bytes after the length field"));
  }
  const char* header = reinterpret_cast<const char*>(base + 8);
  const uint8_t* data = base + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;

  json root = json::parse(header, header + header_len, /*cb=*/nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded()) return invalid("header is not valid JSON");
  if (!root.is_object()) return invalid("header JSON is not an object");

  tensors_.reserve(root.size());
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return invalid("__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
      }
      continue;
    }
    const std::string what = absl::StrCat("tensor '", name, "'");
    if (!entry.is_object()) return invalid(absl::StrCat(what, ": entry is not an object"));
    auto dtype_it = entry.find("dtype");
    auto shape_it = entry.find("shape");
    auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string()) {
      return invalid(absl::StrCat(what, ": missing or non-string \"dtype\""));
    }
    if (shape_it == entry.end() || !shape_it->is_array()) {
      return invalid(absl::StrCat(what, ": missing or non-array \"shape\""));
    }
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
        !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
      return invalid(absl::StrCat(what, ": \"data_offsets\" must be [begin, end] of unsigned"));
    }
    SafetensorsTensor t;
    t.name = name;
    const std::string dtype = dtype_it->get<std::string>();
    absl::StatusOr<DType> type = DTypeFromSafetensors(dtype);
    if (!type.ok()) {
      return absl::Status(type.status().code(),
                          absl::StrCat(p, ": ", what, ": ", type.status().message()));
    }
    t.type = *type;
    int64_t n = 1;
    for (const json& d : *shape_it) {
      if (!d.is_number_unsigned() ||
          d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return invalid(absl::StrCat(what, ": shape ", shape_it->dump(),
                                    " has an entry that is not a non-negative integer"));
      }
      t.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
      if (__builtin_mul_overflow(n, t.shape.back(), &n)) {
        return invalid(absl::StrCat(what, ": shape ", shape_it->dump(), " overflows"));
      }
    }
    t.num_elements = n;
    const uint64_t begin = (*offsets_it)[0].get<uint64_t>();
    const uint64_t end = (*offsets_it)[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return invalid(absl::StrCat(what, ": data_offsets [", begin, ", ", end,
                                  "] out of bounds of the ", data_size, "-byte data section"));
    }
    uint64_t expected = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(n), uint64_t{ElementBytes(t.type)},
                               &expected)) {
      return invalid(absl::StrCat(what, ": byte size of shape ", shape_it->dump(), " overflows"));
    }
    if (end - begin != expected) {
      return invalid(absl::StrCat(what, ": data_offsets [", begin, ", ", end, "] span ",
                                  end - begin, " bytes but ", dtype, " shape ", shape_it->dump(),
                                  " needs ", expected));
    }
    t.data = data + begin;
    t.num_bytes = static_cast<size_t>(expected);
    tensors_.push_back(std::move(t));
  }
  std::stable_sort(
      tensors_.begin(), tensors_.end(),
      [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.data < b.data; });
  for (size_t i = 0; i < tensors_.size(); ++i) tensor_index_[tensors_[i].name] = i;
  return absl::OkStatus();
}

const SafetensorsTensor* SafetensorsFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace textgen
