// The kernel layer: entry-point classes, handle checks, uid stamping, box
// lengths and the EREMOTEIO convention.
#include <gtest/gtest.h>

#include <string>

#include "devx_fixture.h"

namespace softverbs::devx::testing {
namespace {

TEST_F(DevxTest, UnknownGeneralOpcodeIsBadOpThroughEremoteio) {
  // 0xb42 lies in the general range [0xb00, 0xd00) but is not implemented.
  Reply reply = General(alice_, Box(16, 0xb42), 16);
  EXPECT_EQ(reply.error, EREMOTEIO);
  EXPECT_EQ(reply.status(), kBadOp);
  EXPECT_NE(reply.syndrome(), 0u);
}

TEST_F(DevxTest, KnownCreateOpcodeThatTheFirmwareLacksIsBadOp) {
  Reply reply = Create(alice_, Box(0x100, 0x904));  // CREATE_SQ
  EXPECT_EQ(reply.error, EREMOTEIO);
  EXPECT_EQ(reply.status(), kBadOp);
}

TEST_F(DevxTest, WrongEntryPointIsEinvalAndLeavesOutUntouched) {
  Reply as_general = General(alice_, Box(16, kAllocPd), 16);
  EXPECT_EQ(as_general.error, EINVAL);
  EXPECT_EQ(as_general.out[0], 0xee);
  EXPECT_EQ(Create(alice_, Box(16, kQueryHcaCap, 1)).error, EINVAL);
  EXPECT_EQ(Create(alice_, Box(16, 0x123)).error, EINVAL);
  EXPECT_EQ(Run(EntryPoint::kObjQuery, alice_, Box(16, kAllocPd), 16, 1).error, EINVAL);
  // Destroy opcodes are never accepted from users.
  EXPECT_EQ(General(alice_, Box(16, 0x801), 16).error, EINVAL);
  EXPECT_EQ(Create(alice_, Box(16, 0x801)).error, EINVAL);
}

TEST_F(DevxTest, SetFlowTableEntryClassDependsOnOpMod) {
  EXPECT_EQ(Create(alice_, Box(0x100, 0x936, 0)).error, EREMOTEIO);  // accepted, not implemented
  EXPECT_EQ(Create(alice_, Box(0x100, 0x936, 1)).error, EINVAL);
}

TEST_F(DevxTest, VhcaTunnelIdIsRejectedByTheKernel) {
  Box box(16, kAllocPd);
  box.Set(0x20, 16, 7);
  EXPECT_EQ(Create(alice_, box).error, EINVAL);
}

TEST_F(DevxTest, BoxesShorterThanAHeaderAreEinval) {
  EXPECT_EQ(Create(alice_, Box(4, kAllocPd)).error, EINVAL);
  EXPECT_EQ(Create(alice_, Box(16, kAllocPd), 4).error, EINVAL);
}

TEST_F(DevxTest, NonDevxContextMayOnlyRunTheWhitelist) {
  const CallerContext plain{3, 0};
  EXPECT_EQ(General(plain, Box(16, kQueryHcaCap, 1), 0x1010).error, 0);
  EXPECT_EQ(General(plain, Box(16, kQueryHcaVportContext), 0x210).error, 0);
  EXPECT_EQ(General(plain, Box(16, kNop), 16).error, EINVAL);
  EXPECT_EQ(Create(plain, Box(16, kAllocPd)).error, EINVAL);
}

TEST_F(DevxTest, UserUidIsOverwrittenWithTheContextUid) {
  Box box(16, kAllocPd);
  box.Set(0x10, 16, 999);  // a forged uid
  Reply pd = Create(alice_, box);
  ASSERT_EQ(pd.error, 0);
  auto snapshot = firmware_.Lookup(pd.handle);
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->uid, alice_.uid);
  EXPECT_EQ(snapshot->client, alice_.client);
}

TEST_F(DevxTest, CreatedHandleEncodesCreatorOpcodeAndNumber) {
  Reply pd = Create(alice_, Box(16, kAllocPd));
  ASSERT_EQ(pd.error, 0);
  EXPECT_EQ(pd.handle, (uint64_t{kAllocPd} << 32) | pd.number());
  EXPECT_EQ(pd.status(), kOk);
  EXPECT_EQ(pd.syndrome(), 0u);
}

// The kernel takes no out box under 16 bytes (UVERBS_ATTR_MIN_SIZE):
// EINVAL before the firmware, nothing created.
TEST_F(DevxTest, CreateWithAnOutBoxUnder16BytesCreatesNothing) {
  Reply reply = Create(alice_, Box(16, kAllocPd), 8);
  EXPECT_EQ(reply.error, EINVAL);
  EXPECT_EQ(firmware_.ObjectCount(), 0u);
  EXPECT_TRUE(device_.allocated.empty());
}

TEST_F(DevxTest, LongAnswersAreTruncatedToTheCallersOutBox) {
  // pyverbs asks QUERY_HCA_CAP for 16 + 2048 bytes of a 4096-byte union.
  Reply reply = General(alice_, Box(16, kQueryHcaCap, 1), 16 + 2048);
  EXPECT_EQ(reply.error, 0);
  EXPECT_EQ(reply.out.size(), 16u + 2048u);
  // And a caller who wants more than the answer gets zeros after it.
  Reply nop = General(alice_, Box(16, kNop), 64);
  EXPECT_EQ(nop.error, 0);
  for (uint8_t byte : nop.out) EXPECT_EQ(byte, 0);
}

TEST_F(DevxTest, QueryOfAnotherObjectThanTheHandleIsEinval) {
  QpSetup a = MakeQp(alice_);
  QpSetup b = MakeQp(alice_);
  // The box names QP b but the caller passes the handle of QP a.
  EXPECT_EQ(Query(alice_, a.qp, QpCommandBox(kQueryQp, b.qpn), 272).error, EINVAL);
  EXPECT_EQ(Modify(alice_, a.qp, QpCommandBox(k2Err, b.qpn)).error, EINVAL);
  // Same number, other type: a CQ handle for a QP command.
  EXPECT_EQ(Modify(alice_, a.cq, QpCommandBox(k2Err, a.cq & 0xffffff)).error, EINVAL);
}

TEST_F(DevxTest, AnotherClientsHandleIsEinval) {
  QpSetup a = MakeQp(alice_);
  EXPECT_EQ(Query(bob_, a.qp, QpCommandBox(kQueryQp, a.qpn), 272).error, EINVAL);
  EXPECT_EQ(firmware_.Destroy(bob_, a.qp), ENOENT);
}

TEST_F(DevxTest, LogSinkExplainsRejections) {
  std::string last;
  firmware_.SetLogSink([&](std::string_view line) { last = line; });
  General(alice_, Box(16, 0xb42), 16);
  EXPECT_NE(last.find("bad operation"), std::string::npos) << last;
  EXPECT_NE(last.find("0xb42"), std::string::npos) << last;
}

}  // namespace
}  // namespace softverbs::devx::testing
