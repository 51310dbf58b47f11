// kv_block_pool.cpp — KvBlockAllocator: block tables, reference counts, copy-on-write.
//
// Invariants (checked by kv_block_pool_test):
//  - a block is in free_list_ exactly when its refcount is 0;
//  - fill_[b] counts the token slots of block b that hold K/V; every sequence that shares a
//    partially filled block has the same length inside it (fork copies the length, and a shared
//    partial block is copied before anyone writes into it), so fill_ of a sequence's last block
//    equals length % block_size (or block_size) at all times;
//  - tokens_stored_ = sum of fill_ over blocks in use, shared_blocks_ = #blocks with refcount > 1.
// The free list is a stack: a freed block is the next one handed out (warm in cache), and a fresh
// pool hands out blocks 0, 1, 2, ... in order.
#include "hybridscope/trainer/rollout/kv_block_pool.h"

#include <algorithm>
#include <string>

namespace hs::trainer {

KvBlockAllocator::KvBlockAllocator(std::int64_t num_blocks, std::int64_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  if (num_blocks <= 0 || block_size <= 0) {
    throw std::invalid_argument("KvBlockAllocator: num_blocks (" + std::to_string(num_blocks) +
                                ") and block_size (" + std::to_string(block_size) +
                                ") must be positive");
  }
  reset();
}

void KvBlockAllocator::reset() {
  refcount_.assign(static_cast<std::size_t>(num_blocks_), 0);
  fill_.assign(static_cast<std::size_t>(num_blocks_), 0);
  free_list_.resize(static_cast<std::size_t>(num_blocks_));
  for (std::int64_t i = 0; i < num_blocks_; ++i) {
    free_list_[static_cast<std::size_t>(i)] = num_blocks_ - 1 - i;  // pop_back yields 0 first
  }
  sequences_.clear();
  free_ids_.clear();
  tokens_stored_ = 0;
  shared_blocks_ = 0;
  live_sequences_ = 0;
  peak_used_ = 0;
}

std::int64_t KvBlockAllocator::take_block() {
  if (free_list_.empty()) {
    throw KvPoolExhausted("KV block pool exhausted: all " + std::to_string(num_blocks_) +
                          " blocks of " + std::to_string(block_size_) +
                          " tokens are in use — raise hybridscope.kv_num_blocks or lower "
                          "actor_rollout_ref.rollout.max_num_seqs");
  }
  const std::int64_t block = free_list_.back();
  free_list_.pop_back();
  refcount_[static_cast<std::size_t>(block)] = 1;
  fill_[static_cast<std::size_t>(block)] = 0;
  peak_used_ = std::max(peak_used_, num_blocks_ - static_cast<std::int64_t>(free_list_.size()));
  return block;
}

void KvBlockAllocator::release_block(std::int64_t block) {
  auto& refs = refcount_[static_cast<std::size_t>(block)];
  if (refs == 2) --shared_blocks_;
  if (--refs == 0) {
    tokens_stored_ -= fill_[static_cast<std::size_t>(block)];
    fill_[static_cast<std::size_t>(block)] = 0;
    free_list_.push_back(block);
  }
}

const KvBlockAllocator::Sequence& KvBlockAllocator::seq_at(SeqId seq) const {
  if (seq < 0 || seq >= static_cast<SeqId>(sequences_.size()) ||
      !sequences_[static_cast<std::size_t>(seq)].live) {
    throw std::out_of_range("KvBlockAllocator: no live sequence " + std::to_string(seq));
  }
  return sequences_[static_cast<std::size_t>(seq)];
}

KvBlockAllocator::Sequence& KvBlockAllocator::seq_at(SeqId seq) {
  return const_cast<Sequence&>(static_cast<const KvBlockAllocator&>(*this).seq_at(seq));
}

KvBlockAllocator::SeqId KvBlockAllocator::new_id() {
  SeqId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<SeqId>(sequences_.size());
    sequences_.emplace_back();
  }
  auto& s = sequences_[static_cast<std::size_t>(id)];
  s.blocks.clear();
  s.length = 0;
  s.live = true;
  ++live_sequences_;
  return id;
}

KvBlockAllocator::SeqId KvBlockAllocator::add_sequence() { return new_id(); }

KvBlockAllocator::SeqId KvBlockAllocator::fork(SeqId parent) {
  seq_at(parent);  // validate before creating anything
  const SeqId child = new_id();
  // sequences_ may have grown: take references only now.
  const auto& from = sequences_[static_cast<std::size_t>(parent)];
  auto& to = sequences_[static_cast<std::size_t>(child)];
  to.blocks = from.blocks;
  to.length = from.length;
  for (const auto block : to.blocks) {
    auto& refs = refcount_[static_cast<std::size_t>(block)];
    if (refs == 1) ++shared_blocks_;
    ++refs;
  }
  return child;
}

KvBlockAllocator::Slot KvBlockAllocator::append_token(SeqId seq) {
  auto& s = seq_at(seq);
  Slot slot;
  const std::int64_t offset = s.length % block_size_;
  if (offset == 0) {
    s.blocks.push_back(take_block());  // throws before any change when the pool is empty
  } else {
    const std::int64_t last = s.blocks.back();
    if (refcount_[static_cast<std::size_t>(last)] > 1) {
      // Copy-on-write: the other sharers keep `last`; this sequence continues in a private copy
      // holding the same `offset` tokens.
      const std::int64_t copy = take_block();
      fill_[static_cast<std::size_t>(copy)] = offset;
      tokens_stored_ += offset;
      release_block(last);
      s.blocks.back() = copy;
      slot.copy_from = last;
      slot.copy_to = copy;
    }
  }
  const std::int64_t block = s.blocks.back();
  ++fill_[static_cast<std::size_t>(block)];
  ++tokens_stored_;
  ++s.length;
  slot.index = block * block_size_ + offset;
  return slot;
}

void KvBlockAllocator::free_sequence(SeqId seq) {
  auto& s = seq_at(seq);
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) release_block(*it);
  s.blocks.clear();
  s.length = 0;
  s.live = false;
  --live_sequences_;
  free_ids_.push_back(seq);
}

std::int64_t KvBlockAllocator::length(SeqId seq) const { return seq_at(seq).length; }

const std::vector<std::int64_t>& KvBlockAllocator::block_table(SeqId seq) const {
  return seq_at(seq).blocks;
}

KvPoolStats KvBlockAllocator::stats() const {
  KvPoolStats st;
  st.num_blocks = num_blocks_;
  st.block_size = block_size_;
  st.blocks_free = static_cast<std::int64_t>(free_list_.size());
  st.blocks_used = num_blocks_ - st.blocks_free;
  st.tokens_stored = tokens_stored_;
  st.token_capacity_used = st.blocks_used * block_size_;
  st.num_sequences = live_sequences_;
  st.shared_blocks = shared_blocks_;
  st.peak_blocks_used = peak_used_;
  return st;
}

}  // namespace hs::trainer
