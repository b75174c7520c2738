// Shared receive queues: basic SRQs and XRC SRQs.
#include <errno.h>
#include <unistd.h>

#include <bit>

#include "common/device_limits.h"
#include "daemon/device.h"
#include "datapath/tag_matching.h"

namespace softverbs::daemon {

namespace lim = softverbs::limits;
namespace dp = softverbs::datapath;

// Reported max_wr is rounded up to a power of two: it must stay in range.
static_assert(std::has_single_bit(static_cast<unsigned>(lim::kMaxSrqWr)));

Verdict Device::CreateSrq(ClientId c, const protocol::CreateSrqRequest& req,
                          protocol::CreateSrqReply* out) {
  Pd* pd = FindOwned(pds_, c, req.pd);
  if (!pd) return Verdict::Fail(EINVAL, "create_srq: no such PD in this context");
  if (req.srq_type != IBV_SRQT_BASIC && req.srq_type != IBV_SRQT_XRC &&
      req.srq_type != IBV_SRQT_TM) {
    return Verdict::Fail(EOPNOTSUPP, "SRQ type " + std::to_string(req.srq_type) +
                                         " is not supported (basic, XRC and TM are)");
  }
  XrcdHandle* xh = nullptr;
  Cq* cq = nullptr;
  if (req.srq_type == IBV_SRQT_XRC) {
    xh = FindOwned(xrcd_handles_, c, req.xrcd);
    if (!xh) return Verdict::Fail(EINVAL, "XRC SRQ needs an XRC domain of this context");
    cq = FindVerbsCq(c, req.cq);
    if (!cq) return Verdict::Fail(EINVAL, "XRC SRQ needs a CQ of this context");
  }
  if (req.srq_type == IBV_SRQT_TM) {
    // The CQ takes the tag list operations' completions (as mlx5's command QP's).
    cq = FindVerbsCq(c, req.cq);
    if (!cq) return Verdict::Fail(EINVAL, "a tag-matching SRQ needs a CQ of this context");
    if (req.max_num_tags == 0 || req.max_num_tags > dp::kTmMaxNumTags) {
      return Verdict::Fail(EINVAL, "tm_cap.max_num_tags " + std::to_string(req.max_num_tags) +
                                       " is outside 1.." + std::to_string(dp::kTmMaxNumTags));
    }
  }
  // max_wr 0 is accepted and gets a one-WQE queue, as mlx5 and the kernel's
  // ib_create_srq do (rxe alone refuses it); rdma-core's tests create such SRQs.
  if (req.max_wr > static_cast<uint32_t>(lim::kMaxSrqWr)) {
    return Verdict::Fail(EINVAL, "SRQ max_wr " + std::to_string(req.max_wr) + " is above " +
                                     std::to_string(lim::kMaxSrqWr));
  }
  if (req.max_sge > static_cast<uint32_t>(lim::kMaxSrqSge)) {
    return Verdict::Fail(EINVAL, "SRQ max_sge " + std::to_string(req.max_sge) +
                                     " is above the device limit " +
                                     std::to_string(lim::kMaxSrqSge));
  }
  if (req.srq_limit > req.max_wr) {
    return Verdict::Fail(EINVAL, "srq_limit is above max_wr");
  }
  if (srqs_.size() >= static_cast<size_t>(lim::kMaxSrq)) {
    return Verdict::Fail(ENOMEM, "device limit max_srq reached");
  }
  // The ring holds a power of two of WQEs (datapath/recv_queue.h): report
  // what it holds, as mlx5 does, so ibv_post_srq_recv fails with ENOMEM
  // exactly after max_wr outstanding WQEs. kMaxSrqWr is a power of two.
  Srq srq{NextHandle(),
          c,
          next_srqn_,
          pd->handle,
          static_cast<ibv_srq_type>(req.srq_type),
          xh ? xh->xrcd : 0,
          cq ? cq->handle : 0,
          xh ? xh->handle : 0,
          std::bit_ceil(req.max_wr),
          req.max_sge ? req.max_sge : 1,
          req.srq_limit};
  srq.ring_fd = MakeRecvQueueFile(srq.max_wr, srq.max_sge, lim::kMaxSrqWr,
                                  req.srq_type == IBV_SRQT_TM ? req.max_num_tags : 0);
  if (srq.ring_fd < 0) return Verdict::Fail(ENOMEM, "create_srq: cannot make the receive queue");
  next_srqn_++;
  pd->users++;
  if (cq) cq->users++;
  if (xh) {
    xrcds_[xh->xrcd].users++;
    xh->users++;
  }
  srqs_[srq.handle] = srq;
  if (srq.srq_limit) ArmSrqLimit(srq);
  PublishSrqNumber(srq);
  *out = {srq.handle, srq.srqn, srq.max_wr, srq.max_sge};
  return Verdict::Ok();
}

Verdict Device::ModifySrq(ClientId c, const protocol::ModifySrqRequest& req) {
  Srq* srq = FindOwned(srqs_, c, req.handle);
  if (!srq) return Verdict::Fail(EINVAL, "modify_srq: no such SRQ in this context");
  if (req.mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) {
    return Verdict::Fail(EINVAL, "modify_srq: unknown attr_mask bits");
  }
  uint32_t max_wr = srq->max_wr;
  if (req.mask & IBV_SRQ_MAX_WR) {
    if (req.max_wr < 1 || req.max_wr > static_cast<uint32_t>(lim::kMaxSrqWr)) {
      return Verdict::Fail(EINVAL, "SRQ max_wr " + std::to_string(req.max_wr) + " is outside 1.." +
                                       std::to_string(lim::kMaxSrqWr));
    }
    max_wr = std::bit_ceil(req.max_wr);  // what the resized ring holds
  }
  // The limit, new or armed before, must stay within the queue: resizing
  // below an armed limit fails as in rxe.
  const uint32_t limit = (req.mask & IBV_SRQ_LIMIT) ? req.srq_limit : srq->srq_limit;
  if (limit > max_wr) {
    return Verdict::Fail(EINVAL, "srq_limit " + std::to_string(limit) + " is above max_wr " +
                                     std::to_string(max_wr));
  }
  // The ring itself is resized in place by the owner's library, which
  // holds it closed while this runs (datapath/recv_queue.h).
  srq->max_wr = max_wr;
  if (req.mask & IBV_SRQ_LIMIT) {
    srq->srq_limit = req.srq_limit;
    ArmSrqLimit(*srq);
  }
  return Verdict::Ok();
}

Verdict Device::QuerySrq(ClientId c, Handle h, protocol::QuerySrqReply* out) {
  Srq* srq = FindOwned(srqs_, c, h);
  if (!srq) return Verdict::Fail(EINVAL, "query_srq: no such SRQ in this context");
  *out = {srq->max_wr, srq->max_sge, srq->srq_limit, 0};
  return Verdict::Ok();
}

Verdict Device::DestroySrq(ClientId c, Handle h) {
  Srq* srq = FindOwned(srqs_, c, h);
  if (!srq) return Verdict::Fail(EINVAL, "destroy_srq: no such SRQ in this context");
  if (srq->users > 0) {
    return Verdict::Fail(EBUSY, "SRQ is still used by " + std::to_string(srq->users) + " QP(s)");
  }
  pds_[srq->pd].users--;
  if (srq->cq) cqs_[srq->cq].users--;
  Handle xrcd = srq->xrcd;
  ReleaseXrcdHandleUse(srq->xrcd_handle);
  UnpublishSrqNumber(*srq);
  if (srq->ring_fd >= 0) close(srq->ring_fd);
  srqs_.erase(h);
  if (xrcd) ReleaseXrcdUse(xrcd);
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
