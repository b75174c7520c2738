// Memory windows (ibv_alloc_mw(3), ibv_bind_mw(3)): the window is the
// device's object; binding and invalidating it are work requests that run
// in their send queue's order (datapath/engine.h: Host::BindWindow), which
// the device applies to its tables.
#include "abi/ibverbs/mw.h"

#include <errno.h>

#include <new>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/post_checks.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/send_queue.h"

namespace softverbs::provider {

namespace dp = softverbs::datapath;

ibv_mw* AllocMwOp(ibv_pd* pd, ibv_mw_type type) {
  if (!pd) return RejectNull(EINVAL, "ibv_alloc_mw: pd is NULL");
  Context* ctx = Context::From(pd->context);
  protocol::AllocMwRequest req{FromPublic<Pd>(pd)->handle, static_cast<uint32_t>(type)};
  protocol::AllocMwReply rep{};
  if (int err = ctx->channel.Call(protocol::Op::kAllocMw, &req, sizeof(req), &rep, sizeof(rep))) {
    return FailNull<ibv_mw>(err);
  }
  auto* mw = new (std::nothrow) Mw{};
  if (!mw) {
    protocol::HandleRequest undo{rep.handle, 0};
    ctx->channel.Call(protocol::Op::kDeallocMw, undo);
    return RejectNull(ENOMEM, "ibv_alloc_mw: out of memory");
  }
  mw->handle = rep.handle;
  mw->ibv.context = pd->context;
  mw->ibv.pd = pd;
  mw->ibv.rkey = rep.rkey;
  mw->ibv.handle = rep.handle;
  mw->ibv.type = type;
  return &mw->ibv;
}

int DeallocMwOp(ibv_mw* ibmw) {
  if (!ibmw) return Reject(EINVAL, "ibv_dealloc_mw: mw is NULL");
  auto* mw = reinterpret_cast<Mw*>(ibmw);
  protocol::HandleRequest req{mw->handle, 0};
  if (int err = Context::From(ibmw->context)->channel.Call(protocol::Op::kDeallocMw, req)) {
    return err;
  }
  delete mw;
  return 0;
}

int SetBindWr(ibv_qp* qp, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info& info, dp::SendWr* wr,
              const char* verb) {
  if (!mw) return Reject(EINVAL, "%s: mw is NULL", verb);
  if (mw->context != qp->context) {
    return Reject(EINVAL, "%s: the window belongs to another context", verb);
  }
  if (!info.mr && (info.addr || info.length)) {
    return Reject(EINVAL, "%s: a range (addr 0x%llx, length %llu) without an MR", verb,
                  static_cast<unsigned long long>(info.addr),
                  static_cast<unsigned long long>(info.length));
  }
  if (info.mr && info.mr->pd != mw->pd) {
    return Reject(EPERM, "%s: the MR's PD is not the window's", verb);
  }
  wr->mw_handle = reinterpret_cast<Mw*>(mw)->handle;
  wr->rkey = rkey;
  wr->bind_lkey = info.mr ? info.mr->lkey : 0;
  wr->remote_addr = info.addr;
  wr->bind_length = info.length;
  wr->bind_access = info.mw_access_flags;
  return 0;
}

int BindMwOp(ibv_qp* ibqp, ibv_mw* mw, ibv_mw_bind* mw_bind) {
  if (!ibqp || !mw || !mw_bind) return Reject(EINVAL, "ibv_bind_mw: qp, mw or mw_bind is NULL");
  if (mw->type != IBV_MW_TYPE_1) {
    return Reject(EINVAL, "ibv_bind_mw: type 2 windows are bound by IBV_WR_BIND_MW");
  }
  Qp* qp = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(ibqp));
  Context* ctx = Context::From(ibqp->context);
  dp::SendWr wr;
  wr.wr_id = mw_bind->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = mw_bind->send_flags;
  // A type 1 bind changes the key's low 8 bits; the new key is the
  // window's once the bind is posted (as rdma-core's providers do).
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  if (int err = SetBindWr(ibqp, mw, rkey, mw_bind->bind_info, &wr, "ibv_bind_mw")) return err;
  if (int err = CheckSendWr(qp, wr)) return err;
  if (int err = CheckSendState(qp)) return err;
  ProgressContext(ctx);
  if (int err = SubmitSend(ctx, qp, wr)) return err;
  mw->rkey = rkey;
  return 0;
}

}  // namespace softverbs::provider
