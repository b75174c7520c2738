// Indirect memory keys' layouts: the walk from the key's space to its MRs'
// ranges, the copy under the sequence lock, and CheckMrAccess's answer for
// an indirect key (a caller that does not walk layouts cannot use it).
#include "datapath/mkey_layout.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <atomic>
#include <thread>
#include <vector>

#include "datapath/memory.h"

namespace softverbs::datapath {
namespace {

struct Piece {
  uint32_t lkey;
  uint64_t addr;
  uint64_t len;
  bool operator==(const Piece&) const = default;
};

std::vector<Piece> Walk(const MkeyLayoutCopy& l, uint64_t offset, uint64_t len, bool* whole) {
  std::vector<Piece> out;
  *whole = ForEachMkeyPiece(l, offset, len, [&](const UmrEntry& e, uint64_t addr, uint64_t n) {
    out.push_back({e.lkey, addr, n});
    return true;
  });
  return out;
}

MkeyLayoutCopy Layout(std::vector<UmrEntry> entries, uint32_t repeat) {
  MkeyLayoutCopy l;
  l.num_entries = static_cast<uint32_t>(entries.size());
  l.repeat_count = repeat;
  for (size_t i = 0; i < entries.size(); ++i) l.entry[i] = entries[i];
  l.length = MkeyLayoutLength(entries.data(), l.num_entries, repeat);
  return l;
}

TEST(MkeyLayout, AListIsItsEntriesInTurn) {
  const MkeyLayoutCopy l = Layout({{0x1000, 7, 8, 8, 0}, {0x2040, 9, 8, 8, 0}}, 1);
  EXPECT_EQ(l.length, 16u);
  bool whole = false;
  EXPECT_EQ(Walk(l, 0, 16, &whole), (std::vector<Piece>{{7, 0x1000, 8}, {9, 0x2040, 8}}));
  EXPECT_TRUE(whole);
  EXPECT_EQ(Walk(l, 6, 4, &whole), (std::vector<Piece>{{7, 0x1006, 2}, {9, 0x2040, 2}}));
  EXPECT_TRUE(whole);
  EXPECT_EQ(Walk(l, 8, 8, &whole), (std::vector<Piece>{{9, 0x2040, 8}}));
  EXPECT_TRUE(whole);
  Walk(l, 0, 17, &whole);
  EXPECT_FALSE(whole) << "one byte past the layout";
  Walk(l, 16, 1, &whole);
  EXPECT_FALSE(whole);
  EXPECT_TRUE(Walk(l, 16, 0, &whole).empty());
  EXPECT_TRUE(whole) << "an empty range is inside any layout";
}

TEST(MkeyLayout, InterleavedBlocksAdvanceByTheirStrides) {
  // Entry 0: 3 bytes, skip 5 (stride 8); entry 1: 2 bytes, skip 6; 3 blocks.
  const MkeyLayoutCopy l = Layout({{0x100, 1, 3, 8, 0}, {0x900, 2, 2, 8, 0}}, 3);
  EXPECT_EQ(l.length, 15u);
  bool whole = false;
  EXPECT_EQ(Walk(l, 4, 8, &whole),
            (std::vector<Piece>{{2, 0x901, 1}, {1, 0x108, 3}, {2, 0x908, 2}, {1, 0x110, 2}}));
  EXPECT_TRUE(whole);
  EXPECT_EQ(Walk(l, 14, 1, &whole), (std::vector<Piece>{{2, 0x911, 1}}));
  EXPECT_TRUE(whole);
  Walk(l, 14, 2, &whole);
  EXPECT_FALSE(whole);
}

TEST(MkeyLayout, AnEmptyLayoutHoldsNothing) {
  const MkeyLayoutCopy l = Layout({}, 1);
  bool whole = true;
  Walk(l, 0, 1, &whole);
  EXPECT_FALSE(whole);
  const MkeyLayoutCopy zero = Layout({{0x100, 1, 0, 0, 0}}, 4);
  Walk(zero, 0, 1, &whole);
  EXPECT_FALSE(whole);
}

TEST(MkeyLayout, APieceThatFailsStopsTheWalk) {
  const MkeyLayoutCopy l = Layout({{0x1000, 7, 8, 8, 0}, {0x2040, 9, 8, 8, 0}}, 1);
  int calls = 0;
  EXPECT_FALSE(ForEachMkeyPiece(l, 0, 16, [&](const UmrEntry&, uint64_t, uint64_t) {
    ++calls;
    return false;
  }));
  EXPECT_EQ(calls, 1);
}

// A reader never uses a layout the writer was in the middle of: every copy
// it accepts is one of the two layouts written, whole.
TEST(MkeyLayout, ACopyIsNeverTorn) {
  static MkeyLayout slot{};
  const UmrEntry a[2] = {{0x1000, 11, 8, 8, 0}, {0x2000, 11, 8, 8, 0}};
  const UmrEntry b[4] = {
      {0x3000, 22, 4, 4, 0}, {0x4000, 22, 4, 4, 0}, {0x5000, 22, 4, 4, 0}, {0x6000, 22, 4, 4, 0}};
  WriteMkeyLayout(&slot, a, 2, 1, SigAttr{});
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; i < 200000 && !stop.load(); ++i) {
      if (i % 2) {
        WriteMkeyLayout(&slot, a, 2, 1, SigAttr{});
      } else {
        WriteMkeyLayout(&slot, b, 4, 1, SigAttr{});
      }
    }
  });
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    MkeyLayoutCopy c;
    if (!ReadMkeyLayout(slot, &c)) continue;
    ++accepted;
    ASSERT_TRUE(c.num_entries == 2 || c.num_entries == 4);
    ASSERT_EQ(c.length, 16u);
    const uint32_t lkey = c.num_entries == 2 ? 11 : 22;
    for (uint32_t e = 0; e < c.num_entries; ++e) ASSERT_EQ(c.entry[e].lkey, lkey);
  }
  stop = true;
  writer.join();
  EXPECT_GT(accepted, 0);
}

TEST(MkeyLayout, CheckMrAccessDoesNotHandOutAnIndirectKeysAddress) {
  MrEntry e{};
  e.access = IBV_ACCESS_LOCAL_WRITE | kMrIndirect;
  e.owner = 3;
  e.pdn = 7;
  e.iova = 0;
  e.length = 16;
  e.addr = 0x50000;
  e.rkey = 0x80000100u;
  e.lkey = 0x100;
  uint64_t va = 0;
  EXPECT_EQ(CheckMrAccess(e, 0x100, false, 7, 3, IBV_ACCESS_LOCAL_WRITE, 0, 16, &va),
            MrCheck::kIndirect);
  EXPECT_EQ(va, 0u);
  // Its own checks first: a range past it, another PD.
  EXPECT_EQ(CheckMrAccess(e, 0x100, false, 7, 3, 0, 0, 17, &va), MrCheck::kOutOfRange);
  EXPECT_EQ(CheckMrAccess(e, 0x100, false, 8, 3, 0, 0, 16, &va), MrCheck::kBadPd);
}

}  // namespace
}  // namespace softverbs::datapath
