// A GGUF's tensors as one checksum: FNV-1a 64 over the tensors sorted by name, each as its
// name, a 0 byte, the ggml type id (4 bytes, little endian), then its data bytes. Also prints
// each tensor's name, type, size and own FNV-1a 64 (file order).
// Build: cc gguf_checksum.c -I<llama.cpp>/ggml/include -L<build>/bin -lggml-base -o gguf_checksum
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "gguf.h"

static uint64_t Fnv(uint64_t h, const void* p, size_t n) {
  const uint8_t* b = p;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}
static int ByName(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  struct ggml_context* c = NULL;
  struct gguf_init_params p = {false, &c};
  struct gguf_context* g = gguf_init_from_file(argv[1], p);
  if (!g) return 1;
  const int64_t n = gguf_get_n_tensors(g);
  const char** names = malloc(n * sizeof(char*));
  for (int64_t i = 0; i < n; ++i) {
    names[i] = gguf_get_tensor_name(g, i);
    struct ggml_tensor* t = ggml_get_tensor(c, names[i]);
    printf("%s %s %zu %016llx\n", names[i], ggml_type_name(t->type), ggml_nbytes(t),
           (unsigned long long)Fnv(0xcbf29ce484222325ull, t->data, ggml_nbytes(t)));
  }
  qsort(names, n, sizeof(char*), ByName);
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t i = 0; i < n; ++i) {
    struct ggml_tensor* t = ggml_get_tensor(c, names[i]);
    const uint32_t type = (uint32_t)t->type;
    h = Fnv(h, names[i], strlen(names[i]) + 1);
    h = Fnv(h, &type, 4);
    h = Fnv(h, t->data, ggml_nbytes(t));
  }
  printf("fnv1a64 %016llx\n", (unsigned long long)h);
  return 0;
}
