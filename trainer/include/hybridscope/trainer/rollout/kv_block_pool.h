// kv_block_pool.h — bookkeeping of the paged KV cache: fixed-size blocks, per-sequence block
// tables, reference counts so that the n samples of a prompt share the prompt's full blocks
// (copy-on-write of a shared partial block). Free of LibTorch: the tensors that hold K and V
// live in the rollout engine; this class decides which block each token goes to, and its
// stats are what the memory probes read.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace hs::trainer {

class KvPoolExhausted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct KvPoolStats {
  std::int64_t num_blocks = 0;      // capacity
  std::int64_t block_size = 0;      // tokens per block
  std::int64_t blocks_used = 0;     // blocks with refcount > 0
  std::int64_t blocks_free = 0;
  std::int64_t tokens_stored = 0;   // distinct token slots written (a shared block counts once)
  std::int64_t token_capacity_used = 0;  // blocks_used * block_size
  std::int64_t num_sequences = 0;   // live sequences
  std::int64_t shared_blocks = 0;   // blocks with refcount > 1
  std::int64_t peak_blocks_used = 0;
};

class KvBlockAllocator {
 public:
  using SeqId = std::int64_t;

  KvBlockAllocator(std::int64_t num_blocks, std::int64_t block_size);

  /// A new empty sequence.
  SeqId add_sequence();
  /// A new sequence sharing every block of `parent` (refcounts +1), same length.
  SeqId fork(SeqId parent);
  /// Reserves the slot for the next token of `seq` and returns its flat index
  /// (block * block_size + offset). If the last block is shared and partially filled, it is
  /// copied first: `copy_from`/`copy_to` report that block copy (-1 when none) so that the caller
  /// copies the K/V contents. Throws KvPoolExhausted when no block is free.
  struct Slot {
    std::int64_t index = 0;
    std::int64_t copy_from = -1;
    std::int64_t copy_to = -1;
  };
  Slot append_token(SeqId seq);
  /// Releases every block of `seq` (refcount -1; a block returns to the free list at 0). The id
  /// may be handed out again by a later add_sequence/fork.
  void free_sequence(SeqId seq);
  /// Releases everything.
  void reset();

  std::int64_t length(SeqId seq) const;
  const std::vector<std::int64_t>& block_table(SeqId seq) const;
  KvPoolStats stats() const;
  std::int64_t num_blocks() const { return num_blocks_; }
  std::int64_t block_size() const { return block_size_; }

 private:
  struct Sequence {
    std::vector<std::int64_t> blocks;
    std::int64_t length = 0;
    bool live = false;
  };
  std::int64_t take_block();
  void release_block(std::int64_t block);
  const Sequence& seq_at(SeqId seq) const;
  Sequence& seq_at(SeqId seq);
  SeqId new_id();

  std::int64_t num_blocks_;
  std::int64_t block_size_;
  std::vector<std::int32_t> refcount_;
  std::vector<std::int64_t> fill_;  // tokens written into each block
  std::vector<std::int64_t> free_list_;
  std::vector<Sequence> sequences_;
  std::vector<SeqId> free_ids_;  // ids of freed sequences, reused by add_sequence/fork
  // Counters kept up to date on every change so that stats() is O(1) (read every decode step).
  std::int64_t tokens_stored_ = 0;  // sum of fill_ over blocks in use
  std::int64_t shared_blocks_ = 0;  // blocks with refcount > 1
  std::int64_t live_sequences_ = 0;
  std::int64_t peak_used_ = 0;
};

}  // namespace hs::trainer
