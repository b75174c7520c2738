#include "abi/ibverbs/qp_ex_ops.h"

#include <errno.h>

#include "abi/ibverbs/provider.h"

namespace softverbs::provider {
namespace {

// Until the shared-memory data path lands, a work-request batch can be built
// but not executed: wr_complete answers EOPNOTSUPP (documented in
// docs/status.md), and nothing pretends to have been sent.
void WrStart(ibv_qp_ex*) {}
int WrComplete(ibv_qp_ex*) {
  return EOPNOTSUPP;
}
void WrAbort(ibv_qp_ex*) {}
void WrAtomic(ibv_qp_ex*, uint32_t, uint64_t, uint64_t, uint64_t) {}
void WrAtomicFaa(ibv_qp_ex*, uint32_t, uint64_t, uint64_t) {}
void WrRdma(ibv_qp_ex*, uint32_t, uint64_t) {}
void WrRdmaImm(ibv_qp_ex*, uint32_t, uint64_t, __be32) {}
void WrSend(ibv_qp_ex*) {}
void WrSendImm(ibv_qp_ex*, __be32) {}
void WrSendInv(ibv_qp_ex*, uint32_t) {}
void WrSendTso(ibv_qp_ex*, void*, uint16_t, uint16_t) {}
void WrBindMw(ibv_qp_ex*, ibv_mw*, uint32_t, const ibv_mw_bind_info*) {}
void WrLocalInv(ibv_qp_ex*, uint32_t) {}
void WrSetUdAddr(ibv_qp_ex*, ibv_ah*, uint32_t, uint32_t) {}
void WrSetXrcSrqn(ibv_qp_ex*, uint32_t) {}
void WrSetInlineData(ibv_qp_ex*, void*, size_t) {}
void WrSetInlineDataList(ibv_qp_ex*, size_t, const ibv_data_buf*) {}
void WrSetSge(ibv_qp_ex*, uint32_t, uint64_t, uint32_t) {}
void WrSetSgeList(ibv_qp_ex*, size_t, const ibv_sge*) {}

}  // namespace

uint64_t SupportedSendOpsFlags(ibv_qp_type type) {
  constexpr uint64_t kSend = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
  constexpr uint64_t kWrite = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  constexpr uint64_t kReadAtomic = IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                                   IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
  switch (type) {
    case IBV_QPT_RC:
    case IBV_QPT_XRC_SEND:
      return kSend | kWrite | kReadAtomic;
    case IBV_QPT_UC:
      return kSend | kWrite;
    case IBV_QPT_UD:
      return kSend;
    default:
      return 0;
  }
}

void InstallQpExOps(ibv_qp_ex* q) {
  q->wr_start = WrStart;
  q->wr_complete = WrComplete;
  q->wr_abort = WrAbort;
  q->wr_atomic_cmp_swp = WrAtomic;
  q->wr_atomic_fetch_add = WrAtomicFaa;
  q->wr_bind_mw = WrBindMw;
  q->wr_local_inv = WrLocalInv;
  q->wr_rdma_read = WrRdma;
  q->wr_rdma_write = WrRdma;
  q->wr_rdma_write_imm = WrRdmaImm;
  q->wr_send = WrSend;
  q->wr_send_imm = WrSendImm;
  q->wr_send_inv = WrSendInv;
  q->wr_send_tso = WrSendTso;
  q->wr_set_ud_addr = WrSetUdAddr;
  q->wr_set_xrc_srqn = WrSetXrcSrqn;
  q->wr_set_inline_data = WrSetInlineData;
  q->wr_set_inline_data_list = WrSetInlineDataList;
  q->wr_set_sge = WrSetSge;
  q->wr_set_sge_list = WrSetSgeList;
}

void OnQpStateChanged(Qp*, ibv_qp_state) {}

}  // namespace softverbs::provider
