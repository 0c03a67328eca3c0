// A 64-bit integer mixer for hash keys built from token ids (prefix chains, n-grams, disk
// block names): splitmix64's finalizer, under which every input bit flips about half of the
// output bits. Not a cryptographic hash.
#ifndef TEXTGEN_ENGINE_UTIL_MIX64_H_
#define TEXTGEN_ENGINE_UTIL_MIX64_H_

#include <cstdint>

namespace textgen {

inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_UTIL_MIX64_H_
