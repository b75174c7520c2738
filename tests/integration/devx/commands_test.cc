// Every command the emulated firmware executes, good and bad, sent by a real
// client through libmlx5's mlx5dv_devx_* to a real softverbsd.
#include <cmath>

#include "devx_env.h"

namespace devx_it {
namespace {

uint32_t Log2(uint64_t v) {
  uint32_t n = 0;
  while (v >>= 1) ++n;
  return n;
}

// General caps start at out byte 0x10; field offsets relative to it (§3.1).
uint64_t Cap(const Out& out, size_t off, size_t w) {
  return out.Get(0x80 + off, w);
}

TEST_F(DevxTest, QueryHcaCapMatchesIbvQueryDevice) {
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_query_device(ctx_, &attr), 0);
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &port), 0);
  Box in = QueryHcaCapBox(0);
  Out out(0x10 + 0x1000);
  ASSERT_EQ(mlx5dv_devx_general_cmd(ctx_, in.data(), in.size(), out.data(), out.size()), 0);
  EXPECT_EQ(out.status(), kStatusOk);
  EXPECT_EQ(Cap(out, 0x88, 8), Log2(attr.max_qp_wr));              // log_max_qp_sz
  EXPECT_EQ(Cap(out, 0x9b, 5), Log2(attr.max_qp));                 // log_max_qp
  EXPECT_EQ(Cap(out, 0xc8, 8), Log2(uint64_t(attr.max_cqe) + 1));  // log_max_cq_sz
  EXPECT_EQ(Cap(out, 0xdb, 5), Log2(attr.max_cq));                 // log_max_cq
  EXPECT_EQ(Cap(out, 0xea, 6), Log2(attr.max_mr));                 // log_max_mkey
  EXPECT_EQ(Cap(out, 0x32b, 5), Log2(attr.max_pd));                // log_max_pd
  EXPECT_EQ(Cap(out, 0x80, 8), Log2(attr.max_srq_wr));             // log_max_srq_sz
  EXPECT_EQ(Cap(out, 0x1ab, 5), attr.local_ca_ack_delay);
  EXPECT_EQ(Cap(out, 0x1b8, 8), attr.phys_port_cnt);  // num_ports
  EXPECT_EQ(Cap(out, 0x1b6, 2), port.link_layer == IBV_LINK_LAYER_ETHERNET ? 1u : 0u);
  EXPECT_EQ(Cap(out, 0x170, 16), uint64_t(port.gid_tbl_len));   // gid_table_size
  EXPECT_EQ(Cap(out, 0x190, 16), uint64_t(port.pkey_tbl_len));  // pkey_table_size
  EXPECT_EQ(Cap(out, 0x1c3, 5), Log2(port.max_msg_sz));         // log_max_msg
  EXPECT_EQ(Cap(out, 0x21e, 1), attr.atomic_cap != IBV_ATOMIC_NONE ? 1u : 0u);
  EXPECT_EQ(Cap(out, 0x23c, 1), (attr.device_cap_flags & IBV_DEVICE_XRC) ? 1u : 0u);
  EXPECT_EQ(Cap(out, 0x23f, 1), 1u);                                 // rc
  EXPECT_NE(Cap(out, 0x463, 5), 0u);                                 // log_max_uctx: DEVX enabled
  EXPECT_EQ(Cap(out, 0x470, 16), uint64_t(ctx_->num_comp_vectors));  // max_num_eqs
  // DMA memcpy through the send queue, of the length mlx5dv_query_device
  // reports (libmlx5 reads it from here: 2 GiB when the log is 0).
  mlx5dv_context dv{};
  dv.comp_mask = MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH;
  ASSERT_EQ(mlx5dv_query_device(ctx_, &dv), 0);
  EXPECT_EQ(Cap(out, 0x153, 1), 1u);  // dma_mmo_sq
  EXPECT_NE(Cap(out, 0x6b, 5), 0u);   // log_dma_mmo_max_size
  EXPECT_EQ(dv.max_wr_memcpy_length, size_t{1} << Cap(out, 0x6b, 5));
}

TEST_F(DevxTest, QueryHcaCapTruncatesToTheCallersLength) {
  Box in = QueryHcaCapBox(0);
  Out full(0x10 + 0x1000), half(0x10 + 0x800);
  ASSERT_EQ(mlx5dv_devx_general_cmd(ctx_, in.data(), in.size(), full.data(), full.size()), 0);
  ASSERT_EQ(mlx5dv_devx_general_cmd(ctx_, in.data(), in.size(), half.data(), half.size()), 0);
  EXPECT_TRUE(std::equal(half.b.begin(), half.b.end(), full.b.begin()));
}

TEST_F(DevxTest, QueryHcaCapOfGeneral2AndUnknownType) {
  Box caps2 = QueryHcaCapBox(0x20);
  Out out(0x10 + 0x800);
  EXPECT_EQ(mlx5dv_devx_general_cmd(ctx_, caps2.data(), caps2.size(), out.data(), out.size()), 0);
  // A capability type the device does not have: bad parameter.
  Box bad = QueryHcaCapBox(0x3f);
  Out err(0x10 + 0x800);
  EXPECT_EQ(mlx5dv_devx_general_cmd(ctx_, bad.data(), bad.size(), err.data(), err.size()),
            EREMOTEIO);
  EXPECT_EQ(err.status(), kStatusBadParam);
  EXPECT_NE(err.syndrome(), 0u);
}

TEST_F(DevxTest, QueryHcaVportContextReportsThePort) {
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_query_device(ctx_, &attr), 0);
  Box in(16, kQueryHcaVportContext);
  in.Set(0x4c, 4, 1);  // port_num DW2[19:16]
  Out out(528);
  ASSERT_EQ(mlx5dv_devx_general_cmd(ctx_, in.data(), in.size(), out.data(), out.size()), 0);
  const size_t ctx = 0x80;
  EXPECT_EQ(out.Get(ctx + 0x118, 4), uint64_t(IBV_PORT_ACTIVE));  // port_state DW8[7:4]
  EXPECT_EQ(out.Get(ctx + 0x1c0, 64), be64toh(attr.node_guid));   // node_guid bytes 0x38
  // A port the device does not have.
  in.Set(0x4c, 4, 3);
  Out bad(528);
  EXPECT_EQ(mlx5dv_devx_general_cmd(ctx_, in.data(), in.size(), bad.data(), bad.size()), EREMOTEIO);
  EXPECT_NE(bad.status(), kStatusOk);
}

TEST_F(DevxTest, NopAndQueryAdapter) {
  Box nop(16, kNop);
  Out out(16);
  EXPECT_EQ(mlx5dv_devx_general_cmd(ctx_, nop.data(), nop.size(), out.data(), out.size()), 0);
  EXPECT_EQ(out.status(), kStatusOk);
  Box adapter(16, kQueryAdapter);
  Out aout(0x110);
  EXPECT_EQ(mlx5dv_devx_general_cmd(ctx_, adapter.data(), adapter.size(), aout.data(), aout.size()),
            0);
}

TEST_F(DevxTest, UnknownOpcodeIsRemoteIoWithBadOp) {
  // 0xb05 is in the general range the kernel forwards; no firmware knows it.
  Box in(16, 0xb05);
  Out out(16);
  EXPECT_EQ(mlx5dv_devx_general_cmd(ctx_, in.data(), in.size(), out.data(), out.size()), EREMOTEIO);
  EXPECT_EQ(out.status(), kStatusBadOp);
  EXPECT_NE(out.syndrome(), 0u);
  // A create opcode of an object softverbs does not emulate (a TIR).
  Out cout(kCreateOut);
  errno = 0;
  EXPECT_EQ(Create(Box(0x120, kCreateTir), &cout), nullptr);
  EXPECT_EQ(errno, EREMOTEIO);
  EXPECT_EQ(cout.status(), kStatusBadOp);
}

TEST_F(DevxTest, WrongEntryPointIsEinvalWithTheBoxUntouched) {
  Box pd(16, kAllocPd);
  Out out(16);
  EXPECT_EQ(mlx5dv_devx_general_cmd(ctx_, pd.data(), pd.size(), out.data(), out.size()), EINVAL);
  EXPECT_TRUE(out.Untouched());
  Box caps = QueryHcaCapBox(0);
  Out cout(0x1010);
  errno = 0;
  EXPECT_EQ(mlx5dv_devx_obj_create(ctx_, caps.data(), caps.size(), cout.data(), cout.size()),
            nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_TRUE(cout.Untouched());
}

// The kernel takes no box shorter than 16 bytes (UVERBS_ATTR_MIN_SIZE of
// the general command headers): EINVAL before the firmware, the box
// untouched.
TEST_F(DevxTest, BoxesShorterThan16BytesAreEinval) {
  Box pd(16, kAllocPd);
  Out out(8);
  errno = 0;
  EXPECT_EQ(mlx5dv_devx_obj_create(ctx_, pd.data(), pd.size(), out.data(), out.size()), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_TRUE(out.Untouched());
  Box short_pd(12, kAllocPd);
  Out out16(16);
  errno = 0;
  EXPECT_EQ(
      mlx5dv_devx_obj_create(ctx_, short_pd.data(), short_pd.size(), out16.data(), out16.size()),
      nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_TRUE(out16.Untouched());
}

// CREATE_UMEM comes only through mlx5dv_devx_umem_reg: the kernel's create
// entry point refuses it (EINVAL, not the firmware's BAD_OP).
TEST_F(DevxTest, CreateUmemIsNotAnObjectCreate) {
  Box umem(0x40, 0xa08);
  Out out(kCreateOut);
  errno = 0;
  EXPECT_EQ(mlx5dv_devx_obj_create(ctx_, umem.data(), umem.size(), out.data(), out.size()),
            nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_TRUE(out.Untouched());
}

TEST_F(DevxTest, PdAndTransportDomainLifecycle) {
  uint32_t pdn = 0;
  mlx5dv_devx_obj* pd = CreatePd(&pdn);
  ASSERT_NE(pd, nullptr);
  EXPECT_NE(pdn, 0u);
  uint32_t other = 0;
  mlx5dv_devx_obj* pd2 = CreatePd(&other);
  EXPECT_NE(other, pdn);
  Out tout(kCreateOut);
  mlx5dv_devx_obj* td = Create(Box(16, kAllocTransportDomain), &tout);
  ASSERT_NE(td, nullptr);
  EXPECT_NE(tout.number(), 0u);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(td), 0);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(pd2), 0);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(pd), 0);
}

TEST_F(DevxTest, MkeyOnAUmemAndItsPd) {
  uint32_t pdn = 0;
  mlx5dv_devx_obj* pd = CreatePd(&pdn);
  const uint32_t umem = RegUmem();
  Out out(kCreateOut);
  mlx5dv_devx_obj* mkey = Create(CreateMkeyBox(pdn, umem, 1 << 16), &out);
  ASSERT_NE(mkey, nullptr) << strerror(errno) << " status " << int(out.status());
  const uint32_t index = out.number();
  Box q(16, kQueryMkey);
  q.Set(0x48, 24, index);
  Out qout(0x110);
  ASSERT_EQ(mlx5dv_devx_obj_query(mkey, q.data(), q.size(), qout.data(), qout.size()), 0);
  EXPECT_EQ(qout.Get(kMkcByte * 8 + 0x68, 24), pdn);       // mkc.pd
  EXPECT_EQ(qout.Get(kMkcByte * 8 + 0xc0, 64), 1u << 16);  // mkc.len
  // The PD is held by the MKEY; the UMEM too.
  EXPECT_EQ(mlx5dv_devx_obj_destroy(pd), EBUSY);
  EXPECT_EQ(mlx5dv_devx_umem_dereg(umems_.back()->umem), EBUSY);
  // A PD that does not exist: bad resource.
  Out bad(kCreateOut);
  EXPECT_EQ(Create(CreateMkeyBox(0xabcdef, umem, 4096), &bad), nullptr);
  EXPECT_EQ(errno, EREMOTEIO);
  EXPECT_EQ(bad.status(), kStatusBadResource);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(mkey), 0);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(pd), 0);
  EXPECT_EQ(mlx5dv_devx_umem_dereg(umems_.back()->umem), 0);
  umems_.pop_back();
}

TEST_F(DevxTest, CqCreateQueryDestroyAndBadParameters) {
  uint32_t cqn = 0;
  mlx5dv_devx_obj* cq = CreateCq(&cqn);
  ASSERT_NE(cq, nullptr);
  Box q(16, kQueryCq);
  q.Set(0x48, 24, cqn);
  Out out(0x110);
  ASSERT_EQ(mlx5dv_devx_obj_query(cq, q.data(), q.size(), out.data(), out.size()), 0);
  EXPECT_EQ(out.Get(kCqcByte * 8 + 0x63, 5), 8u);  // log_cq_size as created
  // An EQ beyond mlx5dv_devx_query_eqn's range, a size beyond the caps.
  Out bad_eq(kCreateOut), bad_size(kCreateOut);
  EXPECT_EQ(Create(CreateCqBox(RegUmem(), RegUmem(), 99), &bad_eq), nullptr);
  EXPECT_EQ(errno, EREMOTEIO);
  EXPECT_NE(bad_eq.status(), kStatusOk);
  EXPECT_EQ(Create(CreateCqBox(RegUmem(), RegUmem(), 0, 31), &bad_size), nullptr);
  EXPECT_EQ(errno, EREMOTEIO);
  EXPECT_NE(bad_size.status(), kStatusOk);
  // A UMEM id nobody registered.
  Out bad_umem(kCreateOut);
  EXPECT_EQ(Create(CreateCqBox(0xfffff0, RegUmem(), 0), &bad_umem), nullptr);
  EXPECT_EQ(bad_umem.status(), kStatusBadResource);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(cq), 0);
}

TEST_F(DevxTest, QpWalksTheStateMachineAndRejectsBadTransitions) {
  uint32_t pdn = 0, cqn = 0, qpn = 0;
  mlx5dv_devx_obj* pd = CreatePd(&pdn);
  mlx5dv_devx_obj* cq = CreateCq(&cqn);
  Out cout(kCreateOut);
  mlx5dv_devx_obj* qp = CreateQp(pdn, cqn, &qpn, &cout);
  ASSERT_NE(qp, nullptr) << strerror(errno) << " status " << int(cout.status());
  EXPECT_EQ(QpState(qp, qpn), kQpRst);

  // RST -> RTR skips INIT: bad QP state.
  Box early = Init2RtrBox(qpn, 0x99);
  Out eout(16);
  EXPECT_EQ(mlx5dv_devx_obj_modify(qp, early.data(), early.size(), eout.data(), eout.size()),
            EREMOTEIO);
  EXPECT_EQ(eout.status(), kStatusBadQpState);
  EXPECT_EQ(QpState(qp, qpn), kQpRst);

  Box init = Rst2InitBox(qpn);
  Out o(16);
  ASSERT_EQ(mlx5dv_devx_obj_modify(qp, init.data(), init.size(), o.data(), o.size()), 0);
  EXPECT_EQ(QpState(qp, qpn), kQpInit);
  // INIT2RTR with an MTU the PRM does not define: bad parameter.
  Box bad_mtu = Init2RtrBox(qpn, 0x99, 7);
  Out bout(16);
  EXPECT_EQ(mlx5dv_devx_obj_modify(qp, bad_mtu.data(), bad_mtu.size(), bout.data(), bout.size()),
            EREMOTEIO);
  EXPECT_EQ(bout.status(), kStatusBadParam);
  Box rtr = Init2RtrBox(qpn, 0x99);
  ASSERT_EQ(mlx5dv_devx_obj_modify(qp, rtr.data(), rtr.size(), o.data(), o.size()), 0);
  EXPECT_EQ(QpState(qp, qpn), kQpRtr);
  Box rts = Rtr2RtsBox(qpn);
  ASSERT_EQ(mlx5dv_devx_obj_modify(qp, rts.data(), rts.size(), o.data(), o.size()), 0);
  EXPECT_EQ(QpState(qp, qpn), kQpRts);
  Box rts2 = QpBox(kRts2Rts, qpn);
  EXPECT_EQ(mlx5dv_devx_obj_modify(qp, rts2.data(), rts2.size(), o.data(), o.size()), 0);
  // What INIT2RTR set is what QUERY_QP reports.
  Box q = QpBox(kQueryQp, qpn);
  Out qout(kQueryQpOut);
  ASSERT_EQ(mlx5dv_devx_obj_query(qp, q.data(), q.size(), qout.data(), qout.size()), 0);
  EXPECT_EQ(qout.Get(kQpcByte * 8 + 0xa8, 24), 0x99u);  // remote_qpn
  EXPECT_EQ(qout.Get(kQpcByte * 8 + 0x40, 3), 3u);      // mtu

  Box err = QpBox(k2Err, qpn);
  EXPECT_EQ(mlx5dv_devx_obj_modify(qp, err.data(), err.size(), o.data(), o.size()), 0);
  EXPECT_EQ(QpState(qp, qpn), kQpErr);
  Box rst = QpBox(k2Rst, qpn);
  EXPECT_EQ(mlx5dv_devx_obj_modify(qp, rst.data(), rst.size(), o.data(), o.size()), 0);
  EXPECT_EQ(QpState(qp, qpn), kQpRst);

  // The CQ and PD are held by the QP until it goes.
  EXPECT_EQ(mlx5dv_devx_obj_destroy(cq), EBUSY);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(pd), EBUSY);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(qp), 0);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(cq), 0);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(pd), 0);
}

TEST_F(DevxTest, ModifyAndQueryMustNameTheHandlesObject) {
  uint32_t pdn = 0, cqn = 0, qpn = 0;
  mlx5dv_devx_obj* pd = CreatePd(&pdn);
  mlx5dv_devx_obj* cq = CreateCq(&cqn);
  mlx5dv_devx_obj* qp = CreateQp(pdn, cqn, &qpn);
  ASSERT_NE(qp, nullptr);
  // Another QPN in the box than the handle's: EINVAL, box untouched.
  Box other = QpBox(kQueryQp, qpn + 1);
  Out out(kQueryQpOut);
  EXPECT_EQ(mlx5dv_devx_obj_query(qp, other.data(), other.size(), out.data(), out.size()), EINVAL);
  EXPECT_TRUE(out.Untouched());
  // A QP command on the CQ's handle.
  Box on_cq = Rst2InitBox(qpn);
  Out mout(16);
  EXPECT_EQ(mlx5dv_devx_obj_modify(cq, on_cq.data(), on_cq.size(), mout.data(), mout.size()),
            EINVAL);
  // A create opcode through modify.
  Box create = Box(16, kAllocPd);
  EXPECT_EQ(mlx5dv_devx_obj_modify(qp, create.data(), create.size(), mout.data(), mout.size()),
            EINVAL);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(qp), 0);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(cq), 0);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(pd), 0);
}

TEST_F(DevxTest, FlowCounterAllocQueryDealloc) {
  Out out(kCreateOut);
  mlx5dv_devx_obj* counter = Create(Box(0x20, kAllocFlowCounter), &out);
  ASSERT_NE(counter, nullptr) << strerror(errno);
  const uint32_t id = static_cast<uint32_t>(out.Get(0x40, 32));  // flow_counter_id DW2
  EXPECT_NE(id, 0u);
  Box q(0x20, kQueryFlowCounter);
  q.Set(0xe0, 32, id);  // flow_counter_id DW7
  Out qout(0x40);
  ASSERT_EQ(mlx5dv_devx_obj_query(counter, q.data(), q.size(), qout.data(), qout.size()), 0);
  EXPECT_EQ(qout.Get(0x80, 64), 0u);  // packets
  EXPECT_EQ(qout.Get(0xc0, 64), 0u);  // octets
  q.Set(0xe0, 32, id + 1000);
  EXPECT_EQ(mlx5dv_devx_obj_query(counter, q.data(), q.size(), qout.data(), qout.size()), EINVAL);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(counter), 0);
}

// libmlx5 asks for a DEVX context whatever the flags (rdma-core's
// mlx5_alloc_context, always_devx): a context opened without
// MLX5DV_CONTEXT_FLAGS_DEVX, or by ibv_open_device, runs DEVX commands too.
TEST_F(DevxTest, EveryContextIsADevxContext) {
  ibv_context* without_flag = OpenDevx(false);
  ASSERT_NE(without_flag, nullptr);
  ibv_device** list = ibv_get_device_list(nullptr);
  ASSERT_NE(list, nullptr);
  ibv_context* plain = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  ASSERT_NE(plain, nullptr);
  for (ibv_context* c : {without_flag, plain}) {
    Box nop(16, kNop);
    Out nout(16);
    EXPECT_EQ(mlx5dv_devx_general_cmd(c, nop.data(), nop.size(), nout.data(), nout.size()), 0);
    Out pout(kCreateOut);
    mlx5dv_devx_obj* pd = Create(Box(16, kAllocPd), &pout, c);
    ASSERT_NE(pd, nullptr) << strerror(errno);
    EXPECT_EQ(mlx5dv_devx_obj_destroy(pd), 0);
  }
  ibv_close_device(plain);
  ibv_close_device(without_flag);
}

}  // namespace
}  // namespace devx_it
