// Shared receive queues (basic, XRC and tag matching; the tag list's
// operations are in srq_ops.cc).
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "abi/ibverbs/devx_queues.h"
#include "abi/ibverbs/event_lifetime.h"
#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/mlx5_alloc_type.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/parent_domain.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "common/device_limits.h"
#include "common/log.h"
#include "common/personality.h"
#include "common/raw_enum.h"
#include "datapath/tag_matching.h"

namespace softverbs::provider {
namespace {

ibv_srq* CreateSrq(ibv_context* context, ibv_pd* pd, ibv_srq_type type, ibv_xrcd* xrcd, ibv_cq* cq,
                   void* srq_context, ibv_srq_attr* attr, uint32_t max_num_tags = 0) {
  Context* ctx = Context::From(context);
  if (int err = CheckMlx5AllocType("SRQ", "ibv_create_srq")) return FailNull<ibv_srq>(err);
  protocol::CreateSrqRequest req{};
  req.pd = FromPublic<Pd>(pd)->handle;
  req.srq_type = type;
  req.xrcd = xrcd ? FromPublic<Xrcd>(xrcd)->handle : 0;
  req.cq = cq ? FromPublic<Cq>(reinterpret_cast<ibv_cq_ex*>(cq))->handle : 0;
  req.max_wr = attr->max_wr;
  req.max_sge = attr->max_sge;
  req.srq_limit = attr->srq_limit;
  req.max_num_tags = max_num_tags;
  protocol::CreateSrqReply rep{};
  std::vector<int> fds;  // the SRQ's receive queue
  if (int err = ctx->channel.Call(protocol::Op::kCreateSrq, &req, sizeof(req), &rep, sizeof(rep),
                                  nullptr, 0, nullptr, &fds)) {
    return FailNull<ibv_srq>(err);
  }
  auto* srq = new Srq{};
  int map_err = fds.empty() ? EPROTO : srq->ring_mapping.Map(fds[0]);
  for (int fd : fds) close(fd);
  if (map_err) {
    delete srq;
    protocol::HandleRequest undo{rep.handle, 0};
    ctx->channel.Call(protocol::Op::kDestroySrq, undo);
    return RejectNull(map_err, "ibv_create_srq: cannot map the SRQ's ring (%s)", strerror(map_err));
  }
  srq->rq.Attach(srq->ring_mapping.base());
  srq->max_sge = rep.max_sge;
  srq->handle = rep.handle;
  srq->srqn = rep.srqn;
  srq->type = type;
  srq->tm_cq = type == IBV_SRQT_TM ? cq : nullptr;
  srq->ibv.context = context;
  srq->ibv.srq_context = srq_context;
  srq->ibv.pd = pd;
  UseParentDomain(pd);
  srq->ibv.handle = rep.handle;
  pthread_mutex_init(&srq->ibv.mutex, nullptr);
  pthread_cond_init(&srq->ibv.cond, nullptr);
  attr->max_wr = rep.max_wr;
  attr->max_sge = rep.max_sge;
  ctx->Track(rep.handle, &srq->ibv);
  return &srq->ibv;
}

}  // namespace

ibv_srq* CreateSrqExOp(ibv_context* context, ibv_srq_init_attr_ex* attr) {
  if (!context || !attr) {
    return RejectNull(EINVAL, "ibv_create_srq_ex: %s is NULL", !context ? "context" : "attr");
  }
  if (attr->comp_mask >= IBV_SRQ_INIT_ATTR_RESERVED) {
    Log("ibv_create_srq_ex: comp_mask 0x%x has unknown bits", attr->comp_mask);
    return FailNull<ibv_srq>(EINVAL);
  }
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
    Log("ibv_create_srq_ex: IBV_SRQ_INIT_ATTR_PD is required");
    return FailNull<ibv_srq>(EINVAL);
  }
  const uint32_t raw_type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)
                                ? RawEnum(attr->srq_type)
                                : static_cast<uint32_t>(IBV_SRQT_BASIC);
  if (raw_type > IBV_SRQT_TM) {
    return RejectNull(EINVAL, "ibv_create_srq_ex: srq_type %u is not an SRQ type", raw_type);
  }
  ibv_srq_type type = static_cast<ibv_srq_type>(raw_type);
  if (type == IBV_SRQT_TM) {
    // As libmlx5: the tag list's size and a CQ for its operations.
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TM) || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) ||
        !attr->cq) {
      Log("ibv_create_srq_ex: a tag-matching SRQ needs IBV_SRQ_INIT_ATTR_TM and "
          "IBV_SRQ_INIT_ATTR_CQ");
      return FailNull<ibv_srq>(EINVAL);
    }
    if (attr->tm_cap.max_ops > datapath::kTmMaxOps) {
      return RejectNull(EINVAL, "ibv_create_srq_ex: tm_cap.max_ops %u is above %u",
                        attr->tm_cap.max_ops, datapath::kTmMaxOps);
    }
    return CreateSrq(context, attr->pd, type, nullptr, attr->cq, attr->srq_context, &attr->attr,
                     attr->tm_cap.max_num_tags);
  }
  if (type == IBV_SRQT_XRC) {
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
        !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
      Log("ibv_create_srq_ex: an XRC SRQ needs IBV_SRQ_INIT_ATTR_XRCD and IBV_SRQ_INIT_ATTR_CQ");
      return FailNull<ibv_srq>(EINVAL);
    }
  }
  return CreateSrq(context, attr->pd, type, type == IBV_SRQT_XRC ? attr->xrcd : nullptr,
                   type == IBV_SRQT_XRC ? attr->cq : nullptr, attr->srq_context, &attr->attr);
}

int GetSrqNumOp(ibv_srq* srq, uint32_t* srq_num) {
  if (!srq || !srq_num)
    return Reject(EINVAL, "ibv_get_srq_num: %s is NULL", !srq ? "srq" : "srq_num");
  Srq* s = FromPublic<Srq>(srq);
  // libmlx5 answers for any SRQ: DC targets (DCTs) take a basic SRQ, whose
  // number their users - perftest's `-c DC` among them - read this way.
  if (s->type != IBV_SRQT_XRC && ActivePersonality().personality != Personality::kMlx5) {
    return Reject(EINVAL, "ibv_get_srq_num: SRQ 0x%x is not an XRC SRQ", s->srqn);
  }
  *srq_num = s->srqn;
  return 0;
}

}  // namespace softverbs::provider

using namespace softverbs::provider;
namespace protocol = softverbs::protocol;

SV_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!pd || !attr) return RejectNull(EINVAL, "ibv_create_srq: %s is NULL", !pd ? "pd" : "attr");
  return CreateSrq(pd->context, pd, IBV_SRQT_BASIC, nullptr, nullptr, attr->srq_context,
                   &attr->attr);
}

// IBV_SRQ_MAX_WR resizes the ring in place under the post lock
// (datapath/recv_queue.h); fewer than the WQEs posted is EINVAL, as in rxe.
SV_EXPORT int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int attr_mask) {
  if (!srq || !attr) return Reject(EINVAL, "ibv_modify_srq: %s is NULL", !srq ? "srq" : "attr");
  Srq* s = FromPublic<Srq>(srq);
  Context* ctx = Context::From(srq->context);
  protocol::ModifySrqRequest req{s->handle, static_cast<uint32_t>(attr_mask), attr->max_wr,
                                 attr->srq_limit};
  auto call = [&] { return ctx->channel.Call(protocol::Op::kModifySrq, req); };
  const bool resize = (attr_mask & IBV_SRQ_MAX_WR) && attr->max_wr >= 1 &&
                      attr->max_wr <= static_cast<uint32_t>(softverbs::limits::kMaxSrqWr) &&
                      s->rq.header();
  if (!resize) return call();
  std::lock_guard lock(s->post_lock);
  return s->rq.Resize(attr->max_wr, s->ring_mapping.size(), [&](uint32_t posted) {
    if (posted > attr->max_wr) {
      return Reject(EINVAL, "ibv_modify_srq: %u WQEs are posted, more than max_wr %u", posted,
                    attr->max_wr);
    }
    return call();
  });
}

SV_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  if (!srq || !attr) return Reject(EINVAL, "ibv_query_srq: %s is NULL", !srq ? "srq" : "attr");
  protocol::HandleRequest req{FromPublic<Srq>(srq)->handle, 0};
  protocol::QuerySrqReply rep{};
  if (int err = Context::From(srq->context)->channel.Call(protocol::Op::kQuerySrq, req, &rep)) {
    return err;
  }
  attr->max_wr = rep.max_wr;
  attr->max_sge = rep.max_sge;
  attr->srq_limit = rep.srq_limit;
  return 0;
}

SV_EXPORT int ibv_destroy_srq(ibv_srq* srq) {
  if (!srq) return Reject(EINVAL, "ibv_destroy_srq: srq is NULL");
  Srq* s = FromPublic<Srq>(srq);
  Context* ctx = Context::From(srq->context);
  protocol::HandleRequest req{s->handle, 0};
  if (int err = ctx->channel.Call(protocol::Op::kDestroySrq, req)) {
    return err;
  }
  // Untracked, no further event can be handed out for the SRQ: wait until
  // each one that was has been acknowledged (event_lifetime.h).
  ctx->Untrack(s->handle);
  DropUnreadEventsOfDestroyedObjects(ctx);
  WaitUnderMutex(&srq->mutex, &srq->cond,
                 [&] { return srq->events_completed == s->events_reported; });
  ForgetDvQueue(ctx, DvQueueKind::kSrq, s->srqn);  // mlx5 buffers of mlx5dv_init_obj, if any
  UnuseParentDomain(srq->pd);
  pthread_cond_destroy(&srq->cond);
  pthread_mutex_destroy(&srq->mutex);
  delete s;
  return 0;
}
