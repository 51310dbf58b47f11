// kv_block_pool_test.cpp — KvBlockAllocator: a scripted add/append/fork/free sequence with every
// stat spelled out, exhaustion, and a random walk checked against a brute-force recount.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "hybridscope/trainer/rollout/kv_block_pool.h"

namespace hs::trainer {
namespace {

struct Expect {
  std::int64_t used, tokens, shared, sequences, peak;
};

void check(const KvBlockAllocator& a, const Expect& e, int line) {
  const auto s = a.stats();
  SCOPED_TRACE("scripted step at line " + std::to_string(line));
  EXPECT_EQ(s.num_blocks, 6);
  EXPECT_EQ(s.block_size, 4);
  EXPECT_EQ(s.blocks_used, e.used);
  EXPECT_EQ(s.blocks_free, 6 - e.used);
  EXPECT_EQ(s.tokens_stored, e.tokens);
  EXPECT_EQ(s.token_capacity_used, e.used * 4);
  EXPECT_EQ(s.shared_blocks, e.shared);
  EXPECT_EQ(s.num_sequences, e.sequences);
  EXPECT_EQ(s.peak_blocks_used, e.peak);
}
#define CHECK_STATS(a, ...) check(a, Expect{__VA_ARGS__}, __LINE__)

using Table = std::vector<std::int64_t>;

TEST(KvBlockAllocatorTest, ScriptedSequenceHasExactStats) {
  KvBlockAllocator pool(6, 4);
  CHECK_STATS(pool, 0, 0, 0, 0, 0);

  const auto a = pool.add_sequence();
  CHECK_STATS(pool, 0, 0, 0, 1, 0);
  for (std::int64_t i = 0; i < 6; ++i) {
    const auto slot = pool.append_token(a);
    EXPECT_EQ(slot.index, i);  // blocks 0 and 1, in order
    EXPECT_EQ(slot.copy_from, -1);
    EXPECT_EQ(slot.copy_to, -1);
  }
  EXPECT_EQ(pool.block_table(a), (Table{0, 1}));
  EXPECT_EQ(pool.length(a), 6);
  CHECK_STATS(pool, 2, 6, 0, 1, 2);

  const auto b = pool.fork(a);  // shares blocks 0 (full) and 1 (2 of 4 tokens)
  EXPECT_EQ(pool.length(b), 6);
  EXPECT_EQ(pool.block_table(b), (Table{0, 1}));
  CHECK_STATS(pool, 2, 6, 2, 2, 2);

  auto slot = pool.append_token(b);  // copy-on-write of block 1 into block 2
  EXPECT_EQ(slot.copy_from, 1);
  EXPECT_EQ(slot.copy_to, 2);
  EXPECT_EQ(slot.index, 2 * 4 + 2);
  EXPECT_EQ(pool.block_table(b), (Table{0, 2}));
  EXPECT_EQ(pool.block_table(a), (Table{0, 1}));
  CHECK_STATS(pool, 3, 6 + 2 + 1, 1, 2, 3);  // the copy holds 2 tokens, plus the new one

  slot = pool.append_token(a);  // block 1 is a's alone now: written in place
  EXPECT_EQ(slot.copy_from, -1);
  EXPECT_EQ(slot.index, 1 * 4 + 2);
  CHECK_STATS(pool, 3, 10, 1, 2, 3);

  const auto c = pool.fork(b);  // block 0 now held 3 times, block 2 twice
  CHECK_STATS(pool, 3, 10, 2, 3, 3);
  slot = pool.append_token(c);  // copy-on-write of block 2 (3 tokens) into block 3
  EXPECT_EQ(slot.copy_from, 2);
  EXPECT_EQ(slot.copy_to, 3);
  EXPECT_EQ(slot.index, 3 * 4 + 3);
  CHECK_STATS(pool, 4, 10 + 3 + 1, 1, 3, 4);
  slot = pool.append_token(c);  // c's 9th token opens block 4
  EXPECT_EQ(slot.index, 4 * 4);
  EXPECT_EQ(pool.block_table(c), (Table{0, 3, 4}));
  CHECK_STATS(pool, 5, 15, 1, 3, 5);

  pool.free_sequence(a);  // block 1 (3 tokens) returns to the free list; block 0 stays
  CHECK_STATS(pool, 4, 12, 1, 2, 5);
  EXPECT_THROW(pool.free_sequence(a), std::out_of_range);
  EXPECT_THROW(pool.length(a), std::out_of_range);
  EXPECT_THROW(pool.fork(a), std::out_of_range);

  slot = pool.append_token(b);  // b's 8th token, in place in block 2
  EXPECT_EQ(slot.index, 2 * 4 + 3);
  EXPECT_EQ(slot.copy_from, -1);
  slot = pool.append_token(b);  // b's 9th token: the most recently freed block (1) is reused
  EXPECT_EQ(slot.index, 1 * 4);
  EXPECT_EQ(pool.block_table(b), (Table{0, 2, 1}));
  CHECK_STATS(pool, 5, 14, 1, 2, 5);

  for (int i = 0; i < 3; ++i) pool.append_token(c);  // fills block 4
  slot = pool.append_token(c);                         // c's 13th token takes the last block, 5
  EXPECT_EQ(slot.index, 5 * 4);
  CHECK_STATS(pool, 6, 18, 1, 2, 6);
  for (int i = 0; i < 3; ++i) pool.append_token(c);
  CHECK_STATS(pool, 6, 21, 1, 2, 6);

  // Exhausted: a new block is needed and none is free; nothing changes.
  EXPECT_THROW(pool.append_token(c), KvPoolExhausted);
  EXPECT_EQ(pool.length(c), 16);
  CHECK_STATS(pool, 6, 21, 1, 2, 6);
  // Exhausted in the copy-on-write path: d shares b's partial block 1.
  const auto d = pool.fork(b);
  CHECK_STATS(pool, 6, 21, 3, 3, 6);
  EXPECT_THROW(pool.append_token(d), KvPoolExhausted);
  EXPECT_EQ(pool.length(d), 9);
  EXPECT_EQ(pool.block_table(d), (Table{0, 2, 1}));
  CHECK_STATS(pool, 6, 21, 3, 3, 6);

  // Freed ids are handed out again.
  pool.free_sequence(d);
  CHECK_STATS(pool, 6, 21, 1, 2, 6);
  EXPECT_EQ(pool.add_sequence(), d);
  pool.free_sequence(d);
  pool.free_sequence(b);
  pool.free_sequence(c);
  CHECK_STATS(pool, 0, 0, 0, 0, 6);  // peak survives frees
  pool.reset();
  CHECK_STATS(pool, 0, 0, 0, 0, 0);
  EXPECT_EQ(pool.append_token(pool.add_sequence()).index, 0);
}

TEST(KvBlockAllocatorTest, RejectsBadArguments) {
  EXPECT_THROW(KvBlockAllocator(0, 4), std::invalid_argument);
  EXPECT_THROW(KvBlockAllocator(4, 0), std::invalid_argument);
  KvBlockAllocator pool(2, 2);
  EXPECT_THROW(pool.append_token(5), std::out_of_range);
  EXPECT_THROW(pool.block_table(-1), std::out_of_range);
}

// Random add/append/fork/free; after every operation the counters must equal a recount from the
// block tables, and every live token must own a distinct slot unless it is shared by a fork.
TEST(KvBlockAllocatorTest, RandomWalkMatchesBruteForceRecount) {
  const std::int64_t blocks = 24, bs = 3;
  KvBlockAllocator pool(blocks, bs);
  std::mt19937 rng(5);
  std::vector<KvBlockAllocator::SeqId> live;
  std::int64_t peak = 0, copies = 0, exhausted = 0;
  for (int op = 0; op < 4000; ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind == 0 || live.empty()) {
      live.push_back(pool.add_sequence());
    } else if (kind == 1) {
      live.push_back(pool.fork(live[rng() % live.size()]));
    } else if (kind == 2) {
      const auto i = rng() % live.size();
      pool.free_sequence(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      const auto seq = live[rng() % live.size()];
      const auto before = pool.length(seq);
      try {
        const auto slot = pool.append_token(seq);
        copies += slot.copy_from >= 0;
        const auto& table = pool.block_table(seq);
        EXPECT_EQ(slot.index, table.back() * bs + before % bs);
        if (slot.copy_from >= 0) {
          EXPECT_EQ(slot.copy_to, table.back());
        }
      } catch (const KvPoolExhausted&) {
        ++exhausted;
        EXPECT_EQ(pool.length(seq), before);
      }
    }
    // Recount.
    std::map<std::int64_t, int> holders;
    std::map<std::int64_t, std::int64_t> fill;
    for (const auto seq : live) {
      const auto& table = pool.block_table(seq);
      const auto len = pool.length(seq);
      ASSERT_EQ(static_cast<std::int64_t>(table.size()), (len + bs - 1) / bs);
      for (std::size_t i = 0; i < table.size(); ++i) {
        ++holders[table[i]];
        const auto in_block = std::min<std::int64_t>(bs, len - static_cast<std::int64_t>(i) * bs);
        auto [it, fresh] = fill.emplace(table[i], in_block);
        ASSERT_TRUE(fresh || it->second == in_block) << "sharers disagree on block " << table[i];
      }
    }
    std::int64_t tokens = 0, shared = 0;
    for (const auto& [block, n] : fill) tokens += n;
    for (const auto& [block, n] : holders) shared += n > 1;
    const auto used = static_cast<std::int64_t>(holders.size());
    peak = std::max(peak, used);
    const auto s = pool.stats();
    ASSERT_EQ(s.blocks_used, used) << "op " << op;
    ASSERT_EQ(s.blocks_free, blocks - used);
    ASSERT_EQ(s.tokens_stored, tokens) << "op " << op;
    ASSERT_EQ(s.shared_blocks, shared) << "op " << op;
    ASSERT_EQ(s.num_sequences, static_cast<std::int64_t>(live.size()));
    ASSERT_EQ(s.peak_blocks_used, peak);
  }
  EXPECT_GE(copies, 5);  // the walk exercised copy-on-write and exhaustion
  EXPECT_GT(exhausted, 10);
}

}  // namespace
}  // namespace hs::trainer
