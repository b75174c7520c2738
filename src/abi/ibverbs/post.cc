// Posting work requests (ibv_post_send, ibv_post_recv, ibv_post_srq_recv).
// A send runs in the caller's thread (send_queue.h); a receive is appended
// to the QP's or SRQ's shared ring, where initiators claim it. No syscall.
#include <errno.h>
#include <string.h>

#include <algorithm>

#include "abi/ibverbs/mw.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/post_checks.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/send_queue.h"
#include "common/log.h"
#include "common/raw_enum.h"

namespace softverbs::provider {

namespace dp = softverbs::datapath;

namespace {

Cq* CqOf(ibv_cq* cq) {
  return cq ? FromPublic<Cq>(reinterpret_cast<ibv_cq_ex*>(cq)) : nullptr;
}

// Copies an application's ibv_send_wr into a SendWr. Returns 0 or the errno
// ibv_post_send reports.
int ConvertSendWr(Context* ctx, Qp* qp, const ibv_send_wr& in, dp::SendWr* out) {
  out->wr_id = in.wr_id;
  out->opcode = RawEnum(in.opcode);  // any value: the opcode table refuses unknown ones
  out->send_flags = in.send_flags;
  out->imm_data = in.imm_data;
  const dp::WrOpcodeInfo& info = dp::WrOpcode(out->opcode);
  if (info.vendor) {
    // A vendor WR's number is softverbs' own: the verbs API has no such
    // opcode (libmlx5's post_send refuses it as any unknown one).
    return Reject(EINVAL, "ibv_post_send: WR 0x%llx: opcode %u is not an ibv_wr_opcode",
                  static_cast<unsigned long long>(in.wr_id), out->opcode);
  }
  // Which member of the wr union holds the remote side: the headers the
  // opcode's request carries (opcode table).
  if (info.local_op == dp::LocalOp::kBindWindow) {
    // A bind carries no data: the window, its MR and range (the bind_mw
    // member of the second union).
    ibv_mw* mw = in.bind_mw.mw;
    if (mw && mw->type != IBV_MW_TYPE_2) {
      return Reject(EINVAL,
                    "ibv_post_send: WR 0x%llx: IBV_WR_BIND_MW binds type 2 windows (type 1: "
                    "ibv_bind_mw)",
                    static_cast<unsigned long long>(in.wr_id));
    }
    if (int err = SetBindWr(&qp->ibv.qp_base, mw, in.bind_mw.rkey, in.bind_mw.bind_info, out,
                            "ibv_post_send")) {
      return err;
    }
    return CheckSendWr(qp, *out);
  }
  const uint8_t headers = info.headers;
  if (headers & dp::kHeaderReth) {
    out->remote_addr = in.wr.rdma.remote_addr;
    out->rkey = in.wr.rdma.rkey;
  } else if (headers & dp::kHeaderAtomicEth) {
    out->remote_addr = in.wr.atomic.remote_addr;
    out->rkey = in.wr.atomic.rkey;
    out->compare_add = in.wr.atomic.compare_add;
    out->swap = in.wr.atomic.swap;
  }
  if (qp->type == IBV_QPT_XRC_SEND) {
    // The legacy wr.xrc_remote_srq_num sits at the same offset.
    out->remote_srqn = in.qp_type.xrc.remote_srqn;
    out->srqn_set = true;
  }
  if (qp->ibv.qp_base.qp_type == IBV_QPT_UD) {
    if (!in.wr.ud.ah)
      return Reject(EINVAL, "ibv_post_send: WR 0x%llx: UD WR without wr.ud.ah",
                    static_cast<unsigned long long>(in.wr_id));
    if (int err = SetUdAddress(ctx, in.wr.ud.ah, in.wr.ud.remote_qpn, in.wr.ud.remote_qkey, out)) {
      return err;
    }
  }
  if (in.num_sge < 0)
    return Reject(EINVAL, "ibv_post_send: WR 0x%llx: num_sge %d is negative",
                  static_cast<unsigned long long>(in.wr_id), in.num_sge);
  if (in.send_flags & IBV_SEND_INLINE) {
    size_t total = 0;
    for (int i = 0; i < in.num_sge; ++i) total += in.sg_list[i].length;
    if (total > qp->cap.max_inline_data || total > dp::kMaxInline) {
      return Reject(EINVAL,
                    "ibv_post_send: WR 0x%llx: %zu inline bytes, above the QP's max_inline_data %u",
                    static_cast<unsigned long long>(in.wr_id), total,
                    std::min<uint32_t>(qp->cap.max_inline_data, dp::kMaxInline));
    }
    out->inline_len = 0;
    for (int i = 0; i < in.num_sge; ++i) {
      memcpy(out->inline_data + out->inline_len, reinterpret_cast<const void*>(in.sg_list[i].addr),
             in.sg_list[i].length);
      out->inline_len += in.sg_list[i].length;
    }
    out->num_sge = 0;
  } else {
    if (static_cast<uint32_t>(in.num_sge) > qp->cap.max_send_sge ||
        static_cast<uint32_t>(in.num_sge) > dp::kMaxSendSge) {
      return Reject(EINVAL,
                    "ibv_post_send: WR 0x%llx: num_sge %d is above the QP's max_send_sge %u",
                    static_cast<unsigned long long>(in.wr_id), in.num_sge,
                    std::min<uint32_t>(qp->cap.max_send_sge, dp::kMaxSendSge));
    }
    out->num_sge = static_cast<uint32_t>(in.num_sge);
    for (int i = 0; i < in.num_sge; ++i) {
      out->sge[i] = {in.sg_list[i].addr, in.sg_list[i].length, in.sg_list[i].lkey};
    }
  }
  return CheckSendWr(qp, *out);
}

}  // namespace

int PostSendOp(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  Qp* qp = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(ibqp));
  Context* ctx = Context::From(ibqp->context);
  ProgressContext(ctx);
  for (; wr; wr = wr->next) {
    if (PostPlain(ctx, qp, *wr)) continue;
    dp::SendWr swr;
    int err = ConvertSendWr(ctx, qp, *wr, &swr);
    if (!err) err = CheckSendState(qp);
    if (!err) err = SubmitSend(ctx, qp, swr);
    if (err) {
      if (bad_wr) *bad_wr = wr;
      return err;
    }
  }
  return 0;
}

namespace {

// Appends receive WRs to a ring; flushes them at once if the QP is in error.
// kSrq only names the verb in rejections: no work on the success path.
template <bool kSrq, typename Post>
int PostReceives(ibv_recv_wr* wr, ibv_recv_wr** bad_wr, uint32_t max_sge, Post post) {
  const char* const verb = kSrq ? "ibv_post_srq_recv" : "ibv_post_recv";
  for (; wr; wr = wr->next) {
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > max_sge) {
      if (bad_wr) *bad_wr = wr;
      return Reject(EINVAL, "%s: WR 0x%llx: num_sge %d is outside 0..max_recv_sge %u", verb,
                    static_cast<unsigned long long>(wr->wr_id), wr->num_sge, max_sge);
    }
    dp::RecvSge sge[dp::kMaxSendSge];
    for (int i = 0; i < wr->num_sge; ++i) {
      sge[i] = {wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
    }
    if (!post(wr->wr_id, sge, static_cast<uint32_t>(wr->num_sge))) {
      if (bad_wr) *bad_wr = wr;
      return Reject(ENOMEM, "%s: WR 0x%llx: the receive queue is full", verb,
                    static_cast<unsigned long long>(wr->wr_id));
    }
  }
  return 0;
}

}  // namespace

int PostRecvOp(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  Qp* qp = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(ibqp));
  if (ibqp->srq || !qp->rq.valid()) {
    if (bad_wr) *bad_wr = wr;
    Log("ibv_post_recv: QP 0x%x takes its receives from an SRQ (or has no receive queue)",
        ibqp->qp_num);
    return EINVAL;
  }
  // A QP in RESET has no receive queue yet: mlx5 and rxe refuse, INIT and
  // later states accept (receives may be posted before the QP connects).
  const uint32_t state = qp->entry ? qp->entry->state.load(std::memory_order_acquire)
                                   : static_cast<uint32_t>(ibqp->state);
  if (state == IBV_QPS_RESET) {
    if (bad_wr) *bad_wr = wr;
    return Reject(EINVAL, "ibv_post_recv: QP 0x%x is in RESET; post receives from INIT on",
                  ibqp->qp_num);
  }
  std::lock_guard lock(qp->rq_lock);
  int err = PostReceives<false>(
      wr, bad_wr, qp->cap.max_recv_sge,
      [&](uint64_t id, auto* sge, uint32_t n) { return qp->rq.Post(id, sge, n); });
  // A QP in error completes what it is given with IBV_WC_WR_FLUSH_ERR.
  if (qp->entry && qp->entry->state.load(std::memory_order_acquire) == IBV_QPS_ERR) {
    Cq* rcq = CqOf(ibqp->recv_cq);
    if (rcq) dp::FlushRecvQueue(qp->rq, rcq->ring, rcq->event_fd, ibqp->qp_num);
  }
  return err;
}

int PostSrqRecvOp(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  Srq* srq = FromPublic<Srq>(ibsrq);
  if (!srq->rq.valid()) {
    if (bad_wr) *bad_wr = wr;
    return Reject(EINVAL, "ibv_post_srq_recv: SRQ 0x%x has no receive ring", srq->srqn);
  }
  std::lock_guard lock(srq->post_lock);
  return PostReceives<true>(wr, bad_wr, srq->max_sge, [&](uint64_t id, auto* sge, uint32_t n) {
    return srq->rq.Post(id, sge, n);
  });
}

}  // namespace softverbs::provider
