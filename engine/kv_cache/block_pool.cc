#include "engine/kv_cache/block_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"

namespace textgen {

absl::StatusOr<std::unique_ptr<BlockPool>> BlockPool::Create(const KvCacheOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  const size_t bytes = options.BlockStrideBytes() * static_cast<size_t>(options.num_blocks);
  // mmap rather than operator new: the pages are guaranteed untouched until first write (no
  // allocator reuse of dirty memory, no eager commit) and page alignment covers the 64 bytes.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot reserve %u bytes for the KV cache (%d blocks): %s", bytes,
                        options.num_blocks, std::strerror(err)));
  }
  // Huge pages where the kernel allows them (THP "madvise" mode): attention streams every
  // cached token's K/V each step, and 4 KiB pages cost a TLB miss per page. Advisory only:
  // pages are still faulted in lazily, 2 MiB at a time.
  madvise(p, bytes, MADV_HUGEPAGE);
  return std::unique_ptr<BlockPool>(new BlockPool(options, static_cast<std::byte*>(p), bytes));
}

BlockPool::BlockPool(const KvCacheOptions& options, std::byte* data, size_t mapped_bytes)
    : options_(options),
      block_stride_(options.BlockStrideBytes()),
      tile_bytes_(static_cast<size_t>(options.block_size) * options.head_dim *
                  KvTypeBytes(options.type)),
      data_(data),
      mapped_bytes_(mapped_bytes),
      refcount_(options.num_blocks, 0) {
  // Pushed in reverse so the first allocations hand out 0, 1, 2, ...: deterministic ids and
  // the low (first touched) part of the mapping is reused before fresh pages.
  free_list_.reserve(options.num_blocks);
  for (int32_t b = options.num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

BlockPool::~BlockPool() { munmap(data_, mapped_bytes_); }

absl::StatusOr<int32_t> BlockPool::Allocate() {
  int32_t block;
  if (!free_list_.empty()) {
    block = free_list_.back();
    free_list_.pop_back();
  } else if (index_ != nullptr && index_->Oldest() >= 0) {
    block = index_->Oldest();
    if (on_evict_ && !index_->leaf(block)) on_evict_(block);
    index_->Unpublish(block);
    ++evictions_;
  } else {
    return absl::ResourceExhaustedError(
        absl::StrFormat("KV cache pool exhausted: %d blocks of %d tokens all in use",
                        options_.num_blocks, options_.block_size));
  }
  assert(refcount_[block] == 0);
  refcount_[block] = 1;
  return block;
}

absl::Status BlockPool::CheckId(int32_t block, const char* op) const {
  if (block >= 0 && block < options_.num_blocks) return absl::OkStatus();
  assert(false && "KV block id out of range");
  return absl::OutOfRangeError(
      absl::StrFormat("%s of KV block %d, pool has %d blocks", op, block, options_.num_blocks));
}

absl::Status BlockPool::IncRef(int32_t block) {
  if (absl::Status s = CheckId(block, "IncRef"); !s.ok()) return s;
  if (refcount_[block] == 0 && index_ != nullptr && index_->idle(block)) {
    index_->MarkUsed(block);
    refcount_[block] = 1;
    return absl::OkStatus();
  }
  if (refcount_[block] == 0) {
    assert(false && "IncRef of a free KV block");
    return absl::FailedPreconditionError(absl::StrFormat("IncRef of free KV block %d", block));
  }
  ++refcount_[block];
  return absl::OkStatus();
}

absl::Status BlockPool::DecRef(int32_t block) {
  if (absl::Status s = CheckId(block, "DecRef"); !s.ok()) return s;
  if (refcount_[block] == 0) {
    // A double free. Pushing the id again would let two sequences allocate the same block and
    // silently overwrite each other's KV, so refuse instead.
    assert(false && "DecRef of a free KV block (double free)");
    return absl::FailedPreconditionError(
        absl::StrFormat("DecRef of free KV block %d (double free)", block));
  }
  if (--refcount_[block] == 0) {
    if (index_ != nullptr && index_->published(block)) {
      index_->MarkIdle(block);
    } else {
      free_list_.push_back(block);
    }
  }
  return absl::OkStatus();
}

void BlockPool::EnablePrefixIndex() {
  if (index_ == nullptr) {
    index_ = std::make_unique<PrefixIndex>(options_.num_blocks, options_.block_size);
  }
}

bool BlockPool::Publish(int32_t block, uint64_t hash, PrefixIndex::Link parent,
                        absl::Span<const int32_t> tokens) {
  if (index_ == nullptr || !CheckId(block, "Publish").ok() || refcount_[block] == 0) return false;
  return index_->Publish(block, hash, parent, tokens);
}

bool BlockPool::PublishLeaf(int32_t block, PrefixIndex::Link parent,
                            absl::Span<const int32_t> tokens) {
  if (index_ == nullptr || !CheckId(block, "PublishLeaf").ok() || refcount_[block] == 0) {
    return false;
  }
  return index_->PublishLeaf(block, parent, tokens);
}

void BlockPool::Unpublish(int32_t block) {
  if (index_ == nullptr || !CheckId(block, "Unpublish").ok() || !index_->published(block)) return;
  const bool was_idle = index_->idle(block);
  index_->Unpublish(block);
  if (was_idle) free_list_.push_back(block);
}

size_t BlockPool::ResidentBytes() const {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = (mapped_bytes_ + page - 1) / page;
  std::vector<unsigned char> in(pages);
  if (mincore(data_, mapped_bytes_, in.data()) != 0) return 0;
  size_t resident = 0;
  for (unsigned char v : in) resident += v & 1;
  return resident * page;
}

absl::Status BlockPool::Prefault() {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14; older headers lack the name
#endif
  if (madvise(data_, mapped_bytes_, MADV_POPULATE_WRITE) == 0) return absl::OkStatus();
  const int err = errno;
  if (err != EINVAL) {
    // ENOMEM (or EFAULT after a failed commit): the pool's pages cannot all be backed.
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot commit the %u-byte KV cache pool: %s", mapped_bytes_, std::strerror(err)));
  }
  // A kernel without MADV_POPULATE_WRITE: one write per page does the same (an out-of-memory
  // here ends the process, as any first touch would later).
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t off = 0; off < mapped_bytes_; off += page) {
    *reinterpret_cast<volatile unsigned char*>(data_ + off) = 0;
  }
  return absl::OkStatus();
}

int BlockPool::RefCount(int32_t block) const {
  if (block < 0 || block >= options_.num_blocks) return 0;
  return refcount_[block];
}

void BlockPool::CopyBlock(int32_t src, int32_t dst) {
  assert(src >= 0 && src < options_.num_blocks && dst >= 0 && dst < options_.num_blocks);
  if (src == dst) return;
  std::memcpy(data_ + static_cast<size_t>(dst) * block_stride_,
              data_ + static_cast<size_t>(src) * block_stride_,
              options_.ElementsPerBlock() * KvTypeBytes(options_.type));
}

std::byte* BlockPool::Tile(int32_t block, int layer, int kv, int kv_head) {
  assert(block >= 0 && block < options_.num_blocks);
  assert(layer >= 0 && layer < options_.n_layers);
  assert(kv_head >= 0 && kv_head < options_.n_kv_heads);
  const size_t tile = (static_cast<size_t>(layer) * 2 + kv) * options_.n_kv_heads + kv_head;
  return data_ + static_cast<size_t>(block) * block_stride_ + tile * tile_bytes_;
}

float* BlockPool::F32Tile(int32_t block, int layer, int kv, int kv_head) {
  assert(options_.type == KvType::kF32 && "F32 accessor on a BF16 KV pool");
  return reinterpret_cast<float*>(Tile(block, layer, kv, kv_head));
}

uint16_t* BlockPool::Bf16Tile(int32_t block, int layer, int kv, int kv_head) {
  assert(options_.type == KvType::kBf16 && "BF16 accessor on an F32 KV pool");
  return reinterpret_cast<uint16_t*>(Tile(block, layer, kv, kv_head));
}

}  // namespace textgen
