// CREATE_QP / QUERY_QP / DESTROY_QP and the state transitions, including the
// sequence of rdma-core's test_mlx5_devx.py and the mixed verbs/DEVX example
// of mlx5dv_devx_obj_create(3).
#include <gtest/gtest.h>

#include "devx_fixture.h"

namespace softverbs::devx::testing {
namespace {

constexpr uint32_t kRst = 0, kInit = 1, kRtr = 2, kRts = 3, kErr = 6;
constexpr size_t kQpc = kQpcByte * 8;
constexpr size_t kPath = kQpc + kQpcPrimaryPathBit;

Box Rst2Init(uint32_t qpn) {
  Box box = DevxTest::QpCommandBox(kRst2Init, qpn);
  box.SetIn(kQpcByte, 0x490, 1, 1)                         // rre
      .SetIn(kQpcByte, 0x491, 1, 1)                        // rwe
      .SetIn(kQpcByte, kQpcPrimaryPathBit + 0x128, 8, 1);  // vhca_port_num
  return box;
}

Box Init2Rtr(uint32_t qpn, uint32_t remote_qpn, uint32_t psn) {
  Box box = DevxTest::QpCommandBox(kInit2Rtr, qpn);
  box.SetIn(kQpcByte, 0x40, 3, 3)                                              // mtu 1024
      .SetIn(kQpcByte, 0x43, 5, 20)                                            // log_msg_max
      .SetIn(kQpcByte, 0xa8, 24, remote_qpn)                                   // remote_qpn
      .SetIn(kQpcByte, 0x4a3, 5, 12)                                           // min_rnr_nak
      .SetIn(kQpcByte, 0x4a8, 24, psn)                                         // next_rcv_psn
      .SetIn(kQpcByte, kQpcPrimaryPathBit + 0x128, 8, 1)                       // vhca_port_num
      .SetIn(kQpcByte, kQpcPrimaryPathBit + 0x48, 8, 3)                        // src_addr_index
      .SetIn(kQpcByte, kQpcPrimaryPathBit + 0x58, 8, 64)                       // hop_limit
      .SetIn(kQpcByte, kQpcPrimaryPathBit + 0x110, 16, 0xdcba)                 // udp_sport
      .SetIn(kQpcByte, kQpcPrimaryPathBit + 0x80, 64, 0xfe80000000000000ull);  // rgid hi
  return box;
}

Box Rtr2Rts(uint32_t qpn, uint32_t psn) {
  Box box = DevxTest::QpCommandBox(kRtr2Rts, qpn);
  box.SetIn(kQpcByte, 0x38d, 3, 7)                        // retry_count
      .SetIn(kQpcByte, 0x390, 3, 7)                       // rnr_retry
      .SetIn(kQpcByte, 0x3c8, 24, psn)                    // next_send_psn
      .SetIn(kQpcByte, 0x388, 3, 20 & 7)                  // log_sra_max
      .SetIn(kQpcByte, kQpcPrimaryPathBit + 0x40, 5, 14)  // ack_timeout
      .SetIn(kQpcByte, kQpcPrimaryPathBit + 0x128, 8, 1);
  return box;
}

TEST_F(DevxTest, RdmaCoreDevxTestSequenceReachesRts) {
  QpSetup server = MakeQp(alice_);
  QpSetup client = MakeQp(bob_);
  EXPECT_NE(server.qpn, client.qpn);
  EXPECT_EQ(QpState(alice_, server), kRst);

  EXPECT_EQ(Modify(alice_, server.qp, Rst2Init(server.qpn)).error, 0);
  EXPECT_EQ(QpState(alice_, server), kInit);
  EXPECT_EQ(Modify(alice_, server.qp, Init2Rtr(server.qpn, client.qpn, 0x123456)).error, 0);
  EXPECT_EQ(QpState(alice_, server), kRtr);
  Reply rts = Modify(alice_, server.qp, Rtr2Rts(server.qpn, 0xabcdef));
  EXPECT_EQ(rts.error, 0);
  EXPECT_EQ(rts.status(), kOk);

  // test_devx_async_query: QUERY_QP with outlen 272 reads log_rq_size 10.
  Reply query = Query(alice_, server.qp, QpCommandBox(kQueryQp, server.qpn), 272);
  ASSERT_EQ(query.error, 0);
  EXPECT_EQ(query.Get(kQpc + 0x00, 4), kRts);
  EXPECT_EQ(query.Get(kQpc + 0x49, 4), 10u);           // log_rq_size from CREATE_QP
  EXPECT_EQ(query.Get(kQpc + 0x51, 4), 12u);           // log_sq_size
  EXPECT_EQ(query.Get(kQpc + 0x28, 24), server.pdn);   // pd kept: RST2INIT's 0 ignored
  EXPECT_EQ(query.Get(kQpc + 0x3e8, 24), server.cqn);  // cqn_snd kept
  EXPECT_EQ(query.Get(kQpc + 0x490, 1), 1u);           // rre from RST2INIT
  EXPECT_EQ(query.Get(kQpc + 0x40, 3), 3u);            // mtu from INIT2RTR
  EXPECT_EQ(query.Get(kQpc + 0xa8, 24), client.qpn);   // remote_qpn
  EXPECT_EQ(query.Get(kQpc + 0x4a8, 24), 0x123456u);   // next_rcv_psn
  EXPECT_EQ(query.Get(kPath + 0x110, 16), 0xdcbau);    // udp_sport
  EXPECT_EQ(query.Get(kPath + 0x58, 8), 64u);          // hop_limit survives RTR2RTS
  EXPECT_EQ(query.Get(kPath + 0x40, 5), 14u);          // ack_timeout from RTR2RTS
  EXPECT_EQ(query.Get(kQpc + 0x3c8, 24), 0xabcdefu);   // next_send_psn
  EXPECT_EQ(query.Get(kQpc + 0x38d, 3), 7u);           // retry_count
  EXPECT_EQ(query.Get(kQpc + 0x683, 1), 1u);           // dbr_umem_valid forced
}

TEST_F(DevxTest, WrongStateTransitionIsBadQpState) {
  QpSetup qp = MakeQp(alice_);
  Reply early = Modify(alice_, qp.qp, Init2Rtr(qp.qpn, 1, 1));
  EXPECT_EQ(early.error, EREMOTEIO);
  EXPECT_EQ(early.status(), kBadQpState);
  EXPECT_NE(early.syndrome(), 0u);
  EXPECT_EQ(QpState(alice_, qp), kRst);

  EXPECT_EQ(Modify(alice_, qp.qp, Rst2Init(qp.qpn)).error, 0);
  EXPECT_EQ(Modify(alice_, qp.qp, Rst2Init(qp.qpn)).status(), kBadQpState);
  EXPECT_EQ(Modify(alice_, qp.qp, Rtr2Rts(qp.qpn, 1)).status(), kBadQpState);
  EXPECT_EQ(Modify(alice_, qp.qp, QpCommandBox(kRts2Rts, qp.qpn)).status(), kBadQpState);
}

TEST_F(DevxTest, ErrorAndResetAreReachableFromAnyState) {
  QpSetup qp = MakeQp(alice_);
  EXPECT_EQ(Modify(alice_, qp.qp, QpCommandBox(k2Err, qp.qpn)).error, 0);
  EXPECT_EQ(QpState(alice_, qp), kErr);
  EXPECT_EQ(Modify(alice_, qp.qp, Rst2Init(qp.qpn)).status(), kBadQpState);
  EXPECT_EQ(Modify(alice_, qp.qp, QpCommandBox(k2Rst, qp.qpn)).error, 0);
  EXPECT_EQ(QpState(alice_, qp), kRst);
  EXPECT_EQ(Modify(alice_, qp.qp, Rst2Init(qp.qpn)).error, 0);
  // 2ERR and 2RST carry no qpc: a header-plus-qpn box is enough.
  Box short_2err(16, k2Err);
  short_2err.Set(0x48, 24, qp.qpn);
  EXPECT_EQ(Modify(alice_, qp.qp, short_2err).error, 0);
}

TEST_F(DevxTest, OptionalFieldsNeedTheirOptParamBit) {
  QpSetup qp = MakeQp(alice_);
  ASSERT_EQ(Modify(alice_, qp.qp, Rst2Init(qp.qpn)).error, 0);
  ASSERT_EQ(Modify(alice_, qp.qp, Init2Rtr(qp.qpn, 7, 1)).error, 0);
  ASSERT_EQ(Modify(alice_, qp.qp, Rtr2Rts(qp.qpn, 1)).error, 0);
  // RTS2RTS with rre = 0 but no RRE bit: nothing changes.
  Box no_mask = QpCommandBox(kRts2Rts, qp.qpn);
  ASSERT_EQ(Modify(alice_, qp.qp, no_mask).error, 0);
  Reply query = Query(alice_, qp.qp, QpCommandBox(kQueryQp, qp.qpn), 272);
  EXPECT_EQ(query.Get(kQpc + 0x490, 1), 1u);
  // With the RRE bit (1 << 1) the zero is applied.
  Box with_mask = QpCommandBox(kRts2Rts, qp.qpn);
  with_mask.Set(0x80, 32, 1u << 1);
  ASSERT_EQ(Modify(alice_, qp.qp, with_mask).error, 0);
  query = Query(alice_, qp.qp, QpCommandBox(kQueryQp, qp.qpn), 272);
  EXPECT_EQ(query.Get(kQpc + 0x490, 1), 0u);
  EXPECT_EQ(query.Get(kQpc + 0x491, 1), 1u);  // rwe untouched
}

TEST_F(DevxTest, Init2RtrWithABadMtuIsBadParam) {
  QpSetup qp = MakeQp(alice_);
  ASSERT_EQ(Modify(alice_, qp.qp, Rst2Init(qp.qpn)).error, 0);
  Box box = Init2Rtr(qp.qpn, 7, 1);
  box.SetIn(kQpcByte, 0x40, 3, 0);
  EXPECT_EQ(Modify(alice_, qp.qp, box).status(), kBadParam);
  EXPECT_EQ(QpState(alice_, qp), kInit);
}

TEST_F(DevxTest, TruncatedQueryQpKeepsTheHeaderAndState) {
  QpSetup qp = MakeQp(alice_);
  Reply reply = Query(alice_, qp.qp, QpCommandBox(kQueryQp, qp.qpn), 0x1c);
  EXPECT_EQ(reply.error, 0);
  EXPECT_EQ(reply.out.size(), 0x1cu);
  EXPECT_EQ(reply.Get(kQpc, 4), kRst);
}

TEST_F(DevxTest, CreateQpRejectsBadParameters) {
  const uint32_t pdn = device_.AddVerbsObject(ResourceKind::kPd, alice_.client);
  const uint32_t cqn = device_.AddVerbsObject(ResourceKind::kCq, alice_.client);
  const uint32_t dbr = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  const uint32_t wq = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  const Box good = CreateQpBox(pdn, cqn, cqn, dbr, wq);

  Box xrc = good;
  xrc.SetIn(kQpcByte, 0x08, 8, 3);
  EXPECT_EQ(Create(alice_, xrc).status(), kBadParam);
  device_.caps.max_qp_wr = 1 << 11;  // log_max_qp_sz 11 < log_sq_size 12
  EXPECT_EQ(Create(alice_, good).status(), kBadParam);
  device_.caps.max_qp_wr = 1 << 15;
  Box srq = good;
  srq.SetIn(kQpcByte, 0x565, 3, 1);
  EXPECT_EQ(Create(alice_, srq).status(), kBadParam);
  EXPECT_EQ(Create(alice_, CreateQpBox(pdn + 500, cqn, cqn, dbr, wq)).status(), kBadResource);
  EXPECT_EQ(Create(alice_, CreateQpBox(pdn, cqn, cqn, dbr + 500, wq)).status(), kBadResource);
  EXPECT_EQ(Create(alice_, CreateQpBox(pdn, cqn, cqn, dbr, wq + 500)).status(), kBadResource);
  Box short_box(0x100, kCreateQp);
  EXPECT_EQ(Create(alice_, short_box).status(), kBadInputLength);
  device_.caps.send_dbr_less = false;
  Box dbr_less = good;
  dbr_less.SetIn(kQpcByte, 0x80, 2, 1);
  EXPECT_EQ(Create(alice_, dbr_less).status(), kBadParam);
  EXPECT_EQ(firmware_.ObjectCount(), 0u);
  EXPECT_EQ(device_.HoldCount(ResourceKind::kPd, pdn), 0);
}

// mlx5dv_devx_obj_create(3): "create an ibv_cq via ibv_create_cq() and use
// the returned cqn to create a DEVX QP".
TEST_F(DevxTest, DevxQpUsesAVerbsCqByNumber) {
  const uint32_t pdn = device_.AddVerbsObject(ResourceKind::kPd, alice_.client);
  const uint32_t verbs_cqn = device_.AddVerbsObject(ResourceKind::kCq, alice_.client);
  const uint32_t dbr = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  const uint32_t wq = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);

  Reply qp = Create(alice_, CreateQpBox(pdn, verbs_cqn, verbs_cqn, dbr, wq));
  ASSERT_EQ(qp.error, 0);
  // The verbs CQ is held twice (send and receive) until the QP goes.
  EXPECT_EQ(device_.HoldCount(ResourceKind::kCq, verbs_cqn), 2);
  EXPECT_EQ(device_.HoldCount(ResourceKind::kPd, pdn), 1);
  EXPECT_EQ(firmware_.Destroy(alice_, qp.handle), 0);
  EXPECT_EQ(device_.HoldCount(ResourceKind::kCq, verbs_cqn), 0);
  EXPECT_EQ(device_.HoldCount(ResourceKind::kPd, pdn), 0);
}

TEST_F(DevxTest, DevxQpOnAMissingCqFails) {
  const uint32_t pdn = device_.AddVerbsObject(ResourceKind::kPd, alice_.client);
  const uint32_t cqn = device_.AddVerbsObject(ResourceKind::kCq, alice_.client);
  const uint32_t dbr = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  const uint32_t wq = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);

  Reply missing_send = Create(alice_, CreateQpBox(pdn, cqn + 77, cqn, dbr, wq));
  EXPECT_EQ(missing_send.error, EREMOTEIO);
  EXPECT_EQ(missing_send.status(), kBadResource);
  Reply missing_recv = Create(alice_, CreateQpBox(pdn, cqn, cqn + 77, dbr, wq));
  EXPECT_EQ(missing_recv.status(), kBadResource);
  EXPECT_NE(missing_send.syndrome(), missing_recv.syndrome());  // one syndrome per check
  // Another context's CQ (another uid) is missing too.
  const uint32_t bob_cqn = device_.AddVerbsObject(ResourceKind::kCq, bob_.client);
  EXPECT_EQ(Create(alice_, CreateQpBox(pdn, bob_cqn, bob_cqn, dbr, wq)).status(), kBadResource);
  EXPECT_EQ(device_.HoldCount(ResourceKind::kCq, cqn), 0);
  EXPECT_TRUE(device_.allocated.count({ResourceKind::kQp, 0x1000}) == 0);
}

TEST_F(DevxTest, DevxCqUsedByAQpIsBusyUntilTheQpGoes) {
  QpSetup qp = MakeQp(alice_);
  EXPECT_EQ(firmware_.Destroy(alice_, qp.cq), EBUSY);
  EXPECT_TRUE(firmware_.Lookup(qp.cq));
  EXPECT_EQ(firmware_.Destroy(alice_, qp.qp), 0);
  EXPECT_EQ(firmware_.Destroy(alice_, qp.cq), 0);
  EXPECT_TRUE(device_.freed.count({ResourceKind::kQp, qp.qpn}));
  EXPECT_TRUE(device_.freed.count({ResourceKind::kCq, qp.cqn}));
}

TEST_F(DevxTest, ObjDestroyEntryPointTakesTheHandle) {
  QpSetup qp = MakeQp(alice_);
  ObjectHandle handle = qp.qp;
  std::vector<uint8_t> none;
  EXPECT_EQ(firmware_.Execute(EntryPoint::kObjDestroy, alice_, none, none, &handle), 0);
  EXPECT_FALSE(firmware_.Lookup(qp.qp));
}

TEST_F(DevxTest, DestroyAllOfAClientTearsDownChildrenFirst) {
  QpSetup a = MakeQp(alice_);
  Reply pd = Create(alice_, Box(16, kAllocPd));
  Reply td = Create(alice_, Box(16, kAllocTransportDomain));
  Reply counter = Create(alice_, Box(0x20, kAllocFlowCounter));
  QpSetup b = MakeQp(bob_);
  ASSERT_EQ(firmware_.ObjectCount(), 7u);

  EXPECT_EQ(firmware_.DestroyAllOf(alice_.client), 5u);
  EXPECT_EQ(firmware_.ObjectCount(), 2u);
  EXPECT_FALSE(firmware_.Lookup(a.qp));
  EXPECT_FALSE(firmware_.Lookup(pd.handle));
  EXPECT_TRUE(firmware_.Lookup(b.qp));
  EXPECT_EQ(device_.HoldCount(ResourceKind::kPd, a.pdn), 0);
  EXPECT_EQ(device_.HoldCount(ResourceKind::kUmem, a.dbr_umem), 0);
  EXPECT_EQ(device_.HoldCount(ResourceKind::kPd, b.pdn), 1);
  EXPECT_EQ(firmware_.DestroyAllOf(alice_.client), 0u);
  EXPECT_EQ(firmware_.DestroyAllOf(bob_.client), 2u);
  EXPECT_EQ(firmware_.ObjectCount(), 0u);
}

TEST_F(DevxTest, CqCreatedAfterItsQpStillTearsDownInOrder) {
  // Children-first by creation order fails when a parent is newer than its
  // child; DestroyAllOf must still finish.
  const uint32_t pdn = device_.AddVerbsObject(ResourceKind::kPd, alice_.client);
  const uint32_t dbr = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  const uint32_t wq = device_.AddVerbsObject(ResourceKind::kUmem, alice_.client);
  Reply cq = Create(alice_, CreateCqBox(wq, dbr));
  Reply qp = Create(alice_, CreateQpBox(pdn, cq.number(), cq.number(), dbr, wq));
  Reply mkey_pd = Create(alice_, Box(16, kAllocPd));
  Reply mkey = Create(alice_, CreateMkeyBox(mkey_pd.number(), wq, 4096));
  ASSERT_EQ(mkey.error, 0);
  ASSERT_EQ(qp.error, 0);
  EXPECT_EQ(firmware_.DestroyAllOf(alice_.client), 4u);
  EXPECT_EQ(firmware_.ObjectCount(), 0u);
}

}  // namespace
}  // namespace softverbs::devx::testing
