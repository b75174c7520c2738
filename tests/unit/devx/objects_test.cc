// PD, transport domain, flow counter, MKEY and CQ commands.
#include <gtest/gtest.h>

#include "devx_fixture.h"

namespace softverbs::devx::testing {
namespace {

TEST_F(DevxTest, AllocPdTakesItsNumberFromTheDaemon) {
  Reply pd = Create(alice_, Box(16, kAllocPd));
  ASSERT_EQ(pd.error, 0);
  EXPECT_TRUE(device_.allocated.count({ResourceKind::kPd, pd.number()}));
  EXPECT_EQ(firmware_.Destroy(alice_, pd.handle), 0);
  EXPECT_TRUE(device_.freed.count({ResourceKind::kPd, pd.number()}));
  EXPECT_EQ(firmware_.Destroy(alice_, pd.handle), ENOENT);
}

TEST_F(DevxTest, ExhaustedPdNumbersAreLimitsExceeded) {
  device_.exhausted.insert(ResourceKind::kPd);
  Reply pd = Create(alice_, Box(16, kAllocPd));
  EXPECT_EQ(pd.error, EREMOTEIO);
  EXPECT_EQ(pd.status(), kLimitsExceeded);
}

TEST_F(DevxTest, DevxPdUsedByAnMkeyCannotBeDeallocated) {
  Reply pd = Create(alice_, Box(16, kAllocPd));
  const uint32_t umem = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  Reply mkey = Create(alice_, CreateMkeyBox(pd.number(), umem, 4096));
  ASSERT_EQ(mkey.error, 0);
  EXPECT_EQ(firmware_.Destroy(alice_, pd.handle), EBUSY);  // RES_BUSY -> EBUSY
  EXPECT_EQ(firmware_.Destroy(alice_, mkey.handle), 0);
  EXPECT_EQ(firmware_.Destroy(alice_, pd.handle), 0);
}

TEST_F(DevxTest, TransportDomainsAreNumberedFromOne) {
  Reply first = Create(alice_, Box(16, kAllocTransportDomain));
  Reply second = Create(alice_, Box(16, kAllocTransportDomain));
  ASSERT_EQ(first.error, 0);
  EXPECT_EQ(first.number(), 1u);
  EXPECT_EQ(second.number(), 2u);
  EXPECT_EQ(firmware_.Destroy(alice_, first.handle), 0);
  EXPECT_EQ(Create(alice_, Box(16, kAllocTransportDomain)).number(), 1u);
}

TEST_F(DevxTest, TransportDomainLimitComesFromCaps) {
  device_.caps.max_transport_domains = 1;
  EXPECT_EQ(Create(alice_, Box(16, kAllocTransportDomain)).error, 0);
  Reply over = Create(alice_, Box(16, kAllocTransportDomain));
  EXPECT_EQ(over.error, EREMOTEIO);
  EXPECT_EQ(over.status(), kLimitsExceeded);
}

TEST_F(DevxTest, AllZeroAllocFlowCounterSucceeds) {
  // test_devx_obj_export_import: all fields zero, outlen 16.
  Reply counter = Create(alice_, Box(0x20, kAllocFlowCounter));
  ASSERT_EQ(counter.error, 0);
  const auto id = static_cast<uint32_t>(counter.Get(0x40, 32));
  EXPECT_NE(id, 0u);
  EXPECT_EQ(counter.handle, (uint64_t{kAllocFlowCounter} << 32) | id);

  Box query(0x20, kQueryFlowCounter);
  query.Set(0xe0, 32, id);
  Reply stats = Query(alice_, counter.handle, query, 0x20);
  EXPECT_EQ(stats.error, 0);
  EXPECT_EQ(stats.Get(0x80, 64), 0u);  // packets
  EXPECT_EQ(firmware_.Destroy(alice_, counter.handle), 0);
}

TEST_F(DevxTest, FlowCounterBulkIsAlignedAndQueryableInside) {
  Box bulk(0x20, kAllocFlowCounter);
  bulk.Set(0x78, 8, 1);  // 128 counters
  Reply counter = Create(alice_, bulk);
  ASSERT_EQ(counter.error, 0);
  const auto base = static_cast<uint32_t>(counter.Get(0x40, 32));
  EXPECT_EQ(base % 128, 0u);

  Box inside(0x20, kQueryFlowCounter);
  inside.Set(0xe0, 32, base + 100).Set(0xc2, 30, 28);
  EXPECT_EQ(Query(alice_, counter.handle, inside, 0x20 + 27 * 16).error, 0);
  Box past(0x20, kQueryFlowCounter);
  past.Set(0xe0, 32, base + 100).Set(0xc2, 30, 29);
  EXPECT_EQ(Query(alice_, counter.handle, past, 0x20).status(), kBadParam);
  Box outside(0x20, kQueryFlowCounter);
  outside.Set(0xe0, 32, base + 128);
  EXPECT_EQ(Query(alice_, counter.handle, outside, 0x20).error, EINVAL);
}

TEST_F(DevxTest, FlowCounterBulkBeyondCapsIsBadParam) {
  Box bulk(0x20, kAllocFlowCounter);
  bulk.Set(0x73, 5, 11);  // 2^11 > 2^10
  EXPECT_EQ(Create(alice_, bulk).status(), kBadParam);
}

TEST_F(DevxTest, MkeyOnAVerbsPdAndUmemRoundTrips) {
  const uint32_t pdn = device_.AddVerbsObject(ResourceKind::kPd, alice_.client);
  const uint32_t umem = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  Reply mkey = Create(alice_, CreateMkeyBox(pdn, umem, 1 << 20));
  ASSERT_EQ(mkey.error, 0);
  EXPECT_TRUE(device_.allocated.count({ResourceKind::kMkey, mkey.number()}));
  EXPECT_EQ(device_.HoldCount(ResourceKind::kPd, pdn), 1);
  EXPECT_EQ(device_.HoldCount(ResourceKind::kUmem, umem), 1);

  Box query(16, kQueryMkey);
  query.Set(0x48, 24, mkey.number());
  Reply reply = Query(alice_, mkey.handle, query, 0x130);
  ASSERT_EQ(reply.error, 0);
  EXPECT_EQ(reply.Get(0x80 + 0x68, 24), pdn);       // mkc.pd
  EXPECT_EQ(reply.Get(0x80 + 0x38, 8), 0x5au);      // mkey_7_0
  EXPECT_EQ(reply.Get(0x80 + 0xc0, 64), 1u << 20);  // len

  EXPECT_EQ(firmware_.Destroy(alice_, mkey.handle), 0);
  EXPECT_EQ(device_.HoldCount(ResourceKind::kPd, pdn), 0);
  EXPECT_EQ(device_.HoldCount(ResourceKind::kUmem, umem), 0);
}

TEST_F(DevxTest, MkeyRejectsBadParameters) {
  const uint32_t pdn = device_.AddVerbsObject(ResourceKind::kPd, alice_.client);
  const uint32_t umem = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  EXPECT_EQ(Create(alice_, CreateMkeyBox(pdn + 1000, umem, 4096)).status(), kBadResource);
  EXPECT_EQ(Create(alice_, CreateMkeyBox(pdn, umem + 1000, 4096)).status(), kBadResource);
  EXPECT_EQ(Create(alice_, CreateMkeyBox(pdn, umem, uint64_t{1} << 41)).status(), kBadParam);
  Box klm = CreateMkeyBox(pdn, umem, 4096);
  klm.SetIn(kMkcByte, 0x16, 2, 2);  // KLM
  EXPECT_EQ(Create(alice_, klm).status(), kBadParam);
  // Bob may not use Alice's PD.
  const uint32_t bob_umem = device_.AddVerbsObject(ResourceKind::kUmem, bob_.client);
  EXPECT_EQ(Create(bob_, CreateMkeyBox(pdn, bob_umem, 4096)).status(), kBadResource);
}

TEST_F(DevxTest, MkeyBoxThatDoesNotCoverTheMkcIsEinval) {
  Box box(0x40, kCreateMkey);
  EXPECT_EQ(Create(alice_, box).error, EINVAL);
}

TEST_F(DevxTest, CqRoundTripsItsContext) {
  const uint32_t umem = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  const uint32_t dbr = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  Reply cq = Create(alice_, CreateCqBox(umem, dbr, 8, 2));
  ASSERT_EQ(cq.error, 0);
  EXPECT_TRUE(device_.allocated.count({ResourceKind::kCq, cq.number()}));
  EXPECT_EQ(cq.handle, (uint64_t{kCreateCq} << 32) | cq.number());

  Box query(16, kQueryCq);
  query.Set(0x48, 24, cq.number());
  Reply reply = Query(alice_, cq.handle, query, 0x110);
  ASSERT_EQ(reply.error, 0);
  constexpr size_t kCqc = 0x10 * 8;
  EXPECT_EQ(reply.Get(kCqc + 0x63, 5), 8u);    // log_cq_size
  EXPECT_EQ(reply.Get(kCqc + 0xa0, 32), 2u);   // c_eqn
  EXPECT_EQ(reply.Get(kCqc + 0x20, 32), dbr);  // dbr_umem_id
  EXPECT_EQ(reply.Get(kCqc + 0x06, 1), 1u);    // dbr_umem_valid, forced by the kernel
}

TEST_F(DevxTest, CqRejectsBadParameters) {
  const uint32_t umem = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  const uint32_t dbr = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  EXPECT_EQ(Create(alice_, CreateCqBox(umem, dbr, 23)).status(), kBadParam);      // > 2^22
  EXPECT_EQ(Create(alice_, CreateCqBox(umem, dbr, 8, 4)).status(), kBadParam);    // no EQ 4
  EXPECT_EQ(Create(alice_, CreateCqBox(umem + 99, dbr)).status(), kBadResource);  // no umem
  EXPECT_EQ(Create(alice_, CreateCqBox(umem, 0)).status(), kBadResource);         // no dbr
  Box cqe128 = CreateCqBox(umem, dbr);
  cqe128.SetIn(kCqcByte, 0x08, 3, 2);
  EXPECT_EQ(Create(alice_, cqe128).status(), kBadParam);
  Box short_box(0x40, kCreateCq);
  EXPECT_EQ(Create(alice_, short_box).status(), kBadInputLength);
  EXPECT_EQ(firmware_.ObjectCount(), 0u);
}

}  // namespace
}  // namespace softverbs::devx::testing
