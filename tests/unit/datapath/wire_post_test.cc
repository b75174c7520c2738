// datapath/wire_post.h: what a doorbell record carries from one process's
// ring slot to the device - the fixed fields, the SGEs and inline bytes in
// use, nothing more, never more than the limits even when a count lies.
#include "datapath/wire_post.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace softverbs::datapath {
namespace {

WirePostRecord Filled(uint8_t byte) {
  WirePostRecord r;
  memset(static_cast<void*>(&r), byte, sizeof(r));
  return r;
}

TEST(CopyPostRecord, CopiesTheFieldsAndTheSgesInUse) {
  WirePostRecord src = Filled(0);
  src.qpn = 0x1234;
  src.wr.wr_id = 99;
  src.wr.opcode = IBV_WR_RDMA_WRITE;
  src.wr.remote_addr = 0xabc000;
  src.wr.rkey = 0x77;
  src.wr.num_sge = 2;
  src.wr.sge[0] = {0x1000, 8, 5};
  src.wr.sge[1] = {0x2000, 16, 6};
  src.wr.sge[2] = {0xdead, 1, 1};  // not in use
  WirePostRecord dst = Filled(0xee);
  CopyPostRecord(&dst, &src);
  EXPECT_EQ(dst.qpn, 0x1234u);
  EXPECT_EQ(dst.wr.wr_id, 99u);
  EXPECT_EQ(dst.wr.opcode, static_cast<uint32_t>(IBV_WR_RDMA_WRITE));
  EXPECT_EQ(dst.wr.remote_addr, 0xabc000u);
  EXPECT_EQ(dst.wr.rkey, 0x77u);
  EXPECT_EQ(dst.wr.sge[1].addr, 0x2000u);
  EXPECT_EQ(dst.wr.sge[1].lkey, 6u);
  EXPECT_NE(dst.wr.sge[2].addr, 0xdeadu);  // left as it was
  EXPECT_EQ(dst.wr.inline_len, 0u);
  // The retry bookkeeping starts from zero whatever the slot held.
  EXPECT_EQ(dst.wr.first_attempt_ns, 0u);
  EXPECT_EQ(dst.wr.rnr_retries, 0u);
  EXPECT_FALSE(dst.wr.held);
}

TEST(CopyPostRecord, CopiesTheInlineBytesInUse) {
  WirePostRecord src = Filled(0);
  src.wr.send_flags = IBV_SEND_INLINE;
  src.wr.inline_len = 5;
  memcpy(src.wr.inline_data, "hello", 5);
  WirePostRecord dst = Filled(0);
  CopyPostRecord(&dst, &src);
  EXPECT_EQ(dst.wr.inline_len, 5u);
  EXPECT_EQ(memcmp(dst.wr.inline_data, "hello", 5), 0);
}

TEST(CopyPostRecord, CountsBeyondTheLimitsCopyNoMoreThanTheLimits) {
  // A ring slot whose counts lie: the copy keeps the counts (the device
  // refuses the record) and stays inside the record.
  WirePostRecord src = Filled(0x5a);
  src.wr.num_sge = 100000;
  src.wr.inline_len = 100000;
  auto dst = std::make_unique<WirePostRecord>(Filled(0));
  CopyPostRecord(dst.get(), &src);
  EXPECT_EQ(dst->wr.num_sge, 100000u);
  EXPECT_EQ(dst->wr.inline_len, 100000u);
  EXPECT_EQ(dst->wr.sge[kMaxSendSge - 1].lkey, 0x5a5a5a5au);
  EXPECT_EQ(dst->wr.inline_data[kMaxInline - 1], 0x5a);
}

TEST(WirePostRing, SlotsFollowTwoLinesOfCounters) {
  EXPECT_EQ(offsetof(WirePostRing, produced), 0u);
  EXPECT_EQ(offsetof(WirePostRing, consumed), 64u);
  EXPECT_EQ(offsetof(WirePostRing, slots), 128u);
}

}  // namespace
}  // namespace softverbs::datapath
