// ibv_post_srq_ops(3): the tag list operations of a tag-matching SRQ
// (IBV_WR_TAG_ADD, IBV_WR_TAG_DEL, IBV_WR_TAG_SYNC). The list lives in the
// SRQ's shared file (datapath/tag_matching.h), so an operation takes effect
// at once; its completion, when IBV_OPS_SIGNALED asks for one, goes to the
// SRQ's CQ, as libmlx5's command QP completes there. A removal that finds
// the tag consumed by a message (or removed) completes with IBV_WC_TM_ERR,
// signalled or not. Posting errors stop at the failing WR (*bad_op), the
// ones before it done, as ibv_post_send.
#include <errno.h>

#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/send_queue.h"
#include "common/raw_enum.h"
#include "datapath/tag_matching.h"

namespace softverbs::provider {

namespace dp = softverbs::datapath;

namespace {

void CompleteOp(Srq* srq, const ibv_ops_wr* wr, ibv_wc_opcode opcode, ibv_wc_status status,
                bool sync_required) {
  dp::Completion c{};
  c.wr_id = wr->wr_id;
  c.status = status;
  c.opcode = opcode;
  c.wc_flags = sync_required ? IBV_WC_TM_SYNC_REQ : 0;
  CompleteLocal(srq->tm_cq, c);
}

}  // namespace

int PostSrqOpsOp(ibv_srq* ibsrq, ibv_ops_wr* wr, ibv_ops_wr** bad_op) {
  if (!ibsrq || !bad_op)
    return Reject(EINVAL, "ibv_post_srq_ops: %s is NULL", !ibsrq ? "srq" : "bad_op");
  Srq* srq = FromPublic<Srq>(ibsrq);
  dp::TagList list(srq->rq.header());
  if (srq->type != IBV_SRQT_TM || !list.valid()) {
    *bad_op = wr;
    return Reject(EINVAL, "ibv_post_srq_ops: SRQ 0x%x is not a tag-matching SRQ", srq->srqn);
  }
  for (; wr; wr = wr->next) {
    if (wr->flags & ~(IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC)) {
      *bad_op = wr;
      return Reject(EINVAL, "ibv_post_srq_ops: flags 0x%x have unknown bits", wr->flags);
    }
    // The caller's enum, read as the integer it holds (common/raw_enum.h).
    const uint32_t opcode = RawEnum(wr->opcode);
    if (opcode != IBV_WR_TAG_ADD && opcode != IBV_WR_TAG_DEL && opcode != IBV_WR_TAG_SYNC) {
      *bad_op = wr;
      return Reject(EINVAL, "ibv_post_srq_ops: opcode %u is not a tag list operation", opcode);
    }
    if (opcode == IBV_WR_TAG_ADD &&
        (wr->tm.add.num_sge < 0 || static_cast<uint32_t>(wr->tm.add.num_sge) > dp::kTmMaxSge ||
         (wr->tm.add.num_sge && !wr->tm.add.sg_list))) {
      *bad_op = wr;
      return Reject(EINVAL, "ibv_post_srq_ops: a tag takes at most %u SGE (num_sge %d)",
                    dp::kTmMaxSge, wr->tm.add.num_sge);
    }
    if (wr->flags & IBV_OPS_TM_SYNC) list.Sync(wr->tm.unexpected_cnt);
    const bool signaled = wr->flags & IBV_OPS_SIGNALED;
    switch (opcode) {
      case IBV_WR_TAG_ADD: {
        const auto* sge = reinterpret_cast<const dp::RecvSge*>(wr->tm.add.sg_list);
        uint32_t handle = 0;
        if (list.Add(wr->tm.add.recv_wr_id, wr->tm.add.tag, wr->tm.add.mask, sge,
                     static_cast<uint32_t>(wr->tm.add.num_sge), &handle) != 0) {
          *bad_op = wr;
          return Reject(ENOMEM, "ibv_post_srq_ops: the tag list of SRQ 0x%x is full", srq->srqn);
        }
        wr->tm.handle = handle;
        if (signaled) CompleteOp(srq, wr, IBV_WC_TM_ADD, IBV_WC_SUCCESS, list.SyncRequired());
        break;
      }
      case IBV_WR_TAG_DEL:
        if (!list.Remove(wr->tm.handle)) {
          CompleteOp(srq, wr, IBV_WC_TM_DEL, IBV_WC_TM_ERR, list.SyncRequired());
        } else if (signaled) {
          CompleteOp(srq, wr, IBV_WC_TM_DEL, IBV_WC_SUCCESS, list.SyncRequired());
        }
        break;
      default:  // IBV_WR_TAG_SYNC
        if (signaled) CompleteOp(srq, wr, IBV_WC_TM_SYNC, IBV_WC_SUCCESS, list.SyncRequired());
        break;
    }
  }
  return 0;
}

}  // namespace softverbs::provider
