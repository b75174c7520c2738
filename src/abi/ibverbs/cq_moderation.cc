// ibv_modify_cq: completion-event moderation (IBV_CQ_ATTR_MODERATE). With
// cq_count and cq_period both non-zero, an armed CQ raises its completion
// event once cq_count completions came since ibv_req_notify_cq, or cq_period
// microseconds after the first of them, whichever is first (as mlx5; 0 in
// either turns moderation off). Producers count in the CQ's ring
// (CqRing::TakeArm); the period's timer is the owner's helper thread, which
// looks at the moderated CQs while one of them is armed.
#include "abi/ibverbs/cq_moderation.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>

#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/send_queue.h"
#include "common/device_limits.h"
#include "datapath/timers.h"

namespace softverbs::provider {

namespace lim = softverbs::limits;

int ModifyCqOp(ibv_cq* ibcq, ibv_modify_cq_attr* attr) {
  if (!ibcq || !attr) return Reject(EINVAL, "ibv_modify_cq: %s is NULL", !ibcq ? "cq" : "attr");
  if (attr->attr_mask == 0 || (attr->attr_mask & ~static_cast<uint32_t>(IBV_CQ_ATTR_MODERATE))) {
    return Reject(EINVAL, "ibv_modify_cq: attr_mask 0x%x is not IBV_CQ_ATTR_MODERATE",
                  attr->attr_mask);
  }
  if (attr->moderate.cq_period > lim::kMaxCqModerationPeriodUs) {
    return Reject(EINVAL, "ibv_modify_cq: cq_period %u us is above max_cq_period %u",
                  attr->moderate.cq_period, lim::kMaxCqModerationPeriodUs);
  }
  Cq* cq = FromPublic<Cq>(ibcq);
  Context* ctx = Context::From(ibcq->context);
  std::lock_guard lock(ctx->waiting_mutex);
  cq->ring.SetModeration(attr->moderate.cq_count, attr->moderate.cq_period);
  uint32_t period_us = 0;
  const bool moderated = cq->ring.Moderated(&period_us);
  std::erase(ctx->moderated_cqs, cq);
  if (moderated) {
    ctx->moderated_cqs.push_back(cq);
    StartProgressThreadLocked(ctx);
  }
  return 0;
}

void NoteModeratedArm(Cq* cq) {
  uint32_t period_us = 0;
  if (!cq->ring.Moderated(&period_us)) return;
  Context* ctx = Context::From(cq->ibv.context);
  std::lock_guard lock(ctx->waiting_mutex);
  ctx->waiting_cv.notify_one();
}

int64_t FireDueModerationLocked(Context* ctx) {
  int64_t next = -1;
  const uint64_t now = datapath::DeviceClockNs();
  for (Cq* cq : ctx->moderated_cqs) {
    const int64_t due = cq->ring.ModerationDue(now);
    if (due < 0) continue;
    if (due == 0) {
      if (cq->ring.Disarm() && cq->event_fd >= 0) {
        uint64_t one = 1;
        ssize_t ignored = write(cq->event_fd, &one, sizeof(one));
        (void)ignored;
      }
      continue;
    }
    next = next < 0 ? due : std::min(next, due);
  }
  return next;
}

void ForgetModeratedCq(Context* ctx, Cq* cq) {
  std::lock_guard lock(ctx->waiting_mutex);
  std::erase(ctx->moderated_cqs, cq);
}

}  // namespace softverbs::provider
