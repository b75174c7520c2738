#include "abi/ibverbs/qp_ex_ops.h"

#include <errno.h>
#include <string.h>

#include <algorithm>

#include "abi/ibverbs/mw.h"
#include "abi/ibverbs/post_checks.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/send_queue.h"
#include "common/gid_table.h"
#include "common/personality.h"

namespace softverbs::provider {
namespace {

namespace dp = softverbs::datapath;

Qp* QpOf(ibv_qp_ex* q) {
  return FromPublic<Qp>(q);
}

// Remembers err for wr_complete unless an earlier call of the batch failed
// already: the first error is the one reported, as libmlx5 does.
void FailBatch(Qp* qp, int err) {
  if (!qp->batch_error) qp->batch_error = err;
}

// Each wr_<opcode> call opens a new WR in the batch; the wr_set_* calls
// fill the last one. Errors are remembered and reported by wr_complete, as
// rdma-core providers do. An opcode the QP was not created with
// (send_ops_flags) is EINVAL - except on libmlx5's QPs (mlx5dv_create_qp's,
// or any under the mlx5 personality): libmlx5 installs every builder of the
// QP's type whatever the flags, and programs written against it (rdma-core's
// test_mlx5_mkey) use them so.
dp::SendWr* Open(ibv_qp_ex* q, ibv_wr_opcode opcode) {
  Qp* qp = QpOf(q);
  if (!(qp->send_ops_flags & dp::WrOpcode(opcode).send_ops_flag) && !qp->dv_ex.made_by_mlx5dv &&
      ActivePersonality().personality != Personality::kMlx5) {
    FailBatch(
        qp, Reject(EINVAL, "ibv_wr_*: QP 0x%x: opcode %u was not in send_ops_flags at QP creation",
                   q->qp_base.qp_num, opcode));
  }
  dp::SendWr& wr = qp->batch.emplace_back();
  wr.wr_id = q->wr_id;
  wr.send_flags = q->wr_flags;
  wr.opcode = opcode;
  return &wr;
}

dp::SendWr* Last(ibv_qp_ex* q) {
  Qp* qp = QpOf(q);
  if (qp->batch.empty()) {
    FailBatch(qp,
              Reject(EINVAL, "ibv_wr_set_*: QP 0x%x: no WR is open (call ibv_wr_<opcode> first)",
                     q->qp_base.qp_num));
    static thread_local dp::SendWr scratch;
    return &scratch;
  }
  return &qp->batch.back();
}

void WrStart(ibv_qp_ex* q) {
  Qp* qp = QpOf(q);
  qp->batch.clear();
  qp->batch_error = 0;
  qp->dv_ex.umr_mkey = nullptr;  // a UMR left open by the last batch
}

int WrComplete(ibv_qp_ex* q) {
  Qp* qp = QpOf(q);
  Context* ctx = Context::From(q->qp_base.context);
  int err = qp->batch_error;
  if (!err) err = CheckSendState(qp);
  for (size_t i = 0; !err && i < qp->batch.size(); ++i) err = CheckSendWr(qp, qp->batch[i]);
  for (size_t i = 0; !err && i < qp->batch.size(); ++i) err = SubmitSend(ctx, qp, qp->batch[i]);
  qp->batch.clear();
  qp->batch_error = 0;
  return err;
}

void WrAbort(ibv_qp_ex* q) {
  QpOf(q)->batch.clear();
}

void WrAtomicCmpSwp(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
  dp::SendWr* wr = Open(q, IBV_WR_ATOMIC_CMP_AND_SWP);
  wr->rkey = rkey;
  wr->remote_addr = addr;
  wr->compare_add = compare;
  wr->swap = swap;
}
void WrAtomicFetchAdd(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t add) {
  dp::SendWr* wr = Open(q, IBV_WR_ATOMIC_FETCH_AND_ADD);
  wr->rkey = rkey;
  wr->remote_addr = addr;
  wr->compare_add = add;
}
void WrRdmaRead(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
  dp::SendWr* wr = Open(q, IBV_WR_RDMA_READ);
  wr->rkey = rkey;
  wr->remote_addr = addr;
}
void WrRdmaWrite(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
  dp::SendWr* wr = Open(q, IBV_WR_RDMA_WRITE);
  wr->rkey = rkey;
  wr->remote_addr = addr;
}
void WrRdmaWriteImm(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, __be32 imm) {
  dp::SendWr* wr = Open(q, IBV_WR_RDMA_WRITE_WITH_IMM);
  wr->rkey = rkey;
  wr->remote_addr = addr;
  wr->imm_data = imm;
}
// The 8 bytes travel inline (copied now, as the verb allows the caller to
// reuse atomic_wr at once).
void WrAtomicWrite(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, const void* atomic_wr) {
  dp::SendWr* wr = Open(q, IBV_WR_ATOMIC_WRITE);
  wr->rkey = rkey;
  wr->remote_addr = addr;
  if (atomic_wr == nullptr) {
    FailBatch(QpOf(q), Reject(EINVAL, "ibv_wr_atomic_write: atomic_wr is NULL"));
    return;
  }
  memcpy(wr->inline_data, atomic_wr, 8);
  wr->inline_len = 8;
  wr->send_flags |= IBV_SEND_INLINE;
}
void WrSend(ibv_qp_ex* q) {
  Open(q, IBV_WR_SEND);
}
void WrSendImm(ibv_qp_ex* q, __be32 imm) {
  Open(q, IBV_WR_SEND_WITH_IMM)->imm_data = imm;
}
// Operations softverbs never advertises in send_ops_flags.
void WrUnsupported(ibv_qp_ex* q, const char* verb) {
  FailBatch(QpOf(q), Reject(EOPNOTSUPP, "%s is not supported by softverbs", verb));
}
void WrSendInv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
  Open(q, IBV_WR_SEND_WITH_INV)->imm_data = invalidate_rkey;
}
void WrSendTso(ibv_qp_ex* q, void*, uint16_t, uint16_t) {
  WrUnsupported(q, "ibv_wr_send_tso");
}
void WrBindMw(ibv_qp_ex* q, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  dp::SendWr* wr = Open(q, IBV_WR_BIND_MW);
  if (!info) {
    FailBatch(QpOf(q), Reject(EINVAL, "ibv_wr_bind_mw: bind_info is NULL"));
    return;
  }
  if (mw && mw->type != IBV_MW_TYPE_2) {
    FailBatch(QpOf(q),
              Reject(EINVAL, "ibv_wr_bind_mw: binds type 2 windows (type 1: ibv_bind_mw)"));
    return;
  }
  if (int err = SetBindWr(&q->qp_base, mw, rkey, *info, wr, "ibv_wr_bind_mw")) {
    FailBatch(QpOf(q), err);
  }
}
void WrLocalInv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
  Open(q, IBV_WR_LOCAL_INV)->imm_data = invalidate_rkey;
}
void WrSetXrcSrqn(ibv_qp_ex* q, uint32_t remote_srqn) {
  dp::SendWr* wr = Last(q);
  wr->remote_srqn = remote_srqn;
  wr->srqn_set = true;
}
void WrSetUdAddr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  if (!ah) {
    FailBatch(QpOf(q), Reject(EINVAL, "ibv_wr_set_ud_addr: ah is NULL"));
    return;
  }
  if (int err =
          SetUdAddress(Context::From(q->qp_base.context), ah, remote_qpn, remote_qkey, Last(q)))
    FailBatch(QpOf(q), err);
}
void WrSetInlineDataList(ibv_qp_ex* q, size_t num_buf, const ibv_data_buf* buf) {
  Qp* qp = QpOf(q);
  dp::SendWr* wr = Last(q);
  size_t total = 0;
  for (size_t i = 0; i < num_buf; ++i) total += buf[i].length;
  if (total > qp->cap.max_inline_data || total > dp::kMaxInline) {
    FailBatch(qp,
              Reject(EINVAL,
                     "ibv_wr_set_inline_data: QP 0x%x: %zu inline bytes, above max_inline_data %u",
                     q->qp_base.qp_num, total,
                     std::min<uint32_t>(qp->cap.max_inline_data, dp::kMaxInline)));
    return;
  }
  wr->send_flags |= IBV_SEND_INLINE;
  wr->inline_len = 0;
  wr->num_sge = 0;
  for (size_t i = 0; i < num_buf; ++i) {
    memcpy(wr->inline_data + wr->inline_len, buf[i].addr, buf[i].length);
    wr->inline_len += static_cast<uint32_t>(buf[i].length);
  }
}
void WrSetInlineData(ibv_qp_ex* q, void* addr, size_t length) {
  ibv_data_buf buf{addr, length};
  WrSetInlineDataList(q, 1, &buf);
}
void WrSetSgeList(ibv_qp_ex* q, size_t num_sge, const ibv_sge* sge) {
  Qp* qp = QpOf(q);
  dp::SendWr* wr = Last(q);
  if (num_sge > qp->cap.max_send_sge || num_sge > dp::kMaxSendSge) {
    FailBatch(qp,
              Reject(EINVAL,
                     "ibv_wr_set_sge_list: QP 0x%x: num_sge %zu is above the QP's max_send_sge %u",
                     q->qp_base.qp_num, num_sge,
                     std::min<uint32_t>(qp->cap.max_send_sge, dp::kMaxSendSge)));
    return;
  }
  wr->num_sge = static_cast<uint32_t>(num_sge);
  for (size_t i = 0; i < num_sge; ++i) wr->sge[i] = {sge[i].addr, sge[i].length, sge[i].lkey};
}
void WrSetSge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
  ibv_sge sge{addr, length, lkey};
  WrSetSgeList(q, 1, &sge);
}

}  // namespace

uint64_t SupportedSendOpsFlags(ibv_qp_type type) {
  return dp::SendOpsFlagsOf(type);
}

void InstallQpExOps(ibv_qp_ex* q) {
  q->wr_start = WrStart;
  q->wr_complete = WrComplete;
  q->wr_abort = WrAbort;
  q->wr_atomic_cmp_swp = WrAtomicCmpSwp;
  q->wr_atomic_fetch_add = WrAtomicFetchAdd;
  q->wr_atomic_write = WrAtomicWrite;
  q->wr_bind_mw = WrBindMw;
  q->wr_local_inv = WrLocalInv;
  q->wr_rdma_read = WrRdmaRead;
  q->wr_rdma_write = WrRdmaWrite;
  q->wr_rdma_write_imm = WrRdmaWriteImm;
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

void OnQpStateChanged(Qp* qp, ibv_qp_state state) {
  if (state == IBV_QPS_ERR) FlushQp(qp);
  if (state == IBV_QPS_RESET) EmptyQp(qp);
}

}  // namespace softverbs::provider
