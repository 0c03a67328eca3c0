// A cheap identity of a model file (or a Hugging Face model directory): what tells the KV disk
// tier that files it wrote came from the same weights, without reading the weights.
#ifndef TEXTGEN_ENGINE_UTIL_FILE_IDENTITY_H_
#define TEXTGEN_ENGINE_UTIL_FILE_IDENTITY_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace textgen {

// A 64-bit hash of the file's size, its first MiB (a GGUF's header, metadata and tensor index;
// a safetensors' JSON header) and 64 evenly spaced 4 KiB samples of the rest (so two files of
// one shape and metadata whose weights differ, e.g. synthetic models of two seeds, differ too).
// Reads at most ~1.3 MiB whatever the file's size. A directory: every regular file in it
// (not recursive), by name in order, its name and identity. The file's path and times are not
// part of it: a copied or moved model keeps its identity. NotFound / PermissionDenied /
// Internal with the path when the file cannot be read.
absl::StatusOr<uint64_t> FileIdentity(const std::string& path);

// A fast 64-bit checksum (xxHash64's stripe structure and constants; not claimed
// bit-compatible with it). Several GB/s, so a KV block's checksum costs little next to its read.
uint64_t Checksum64(const void* data, size_t bytes, uint64_t seed = 0);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_UTIL_FILE_IDENTITY_H_
