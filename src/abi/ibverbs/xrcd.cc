// XRC domains. The fd's inode names a domain shared by every process that
// opens the same file; the fd travels to the daemon, which reads its inode.
#include <errno.h>
#include <fcntl.h>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "common/log.h"

namespace softverbs::provider {

ibv_xrcd* OpenXrcdOp(ibv_context* context, ibv_xrcd_init_attr* attr) {
  if (!context || !attr) {
    return RejectNull(EINVAL, "ibv_open_xrcd: %s is NULL", !context ? "context" : "xrcd_init_attr");
  }
  if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
    return RejectNull(EOPNOTSUPP, "ibv_open_xrcd: comp_mask 0x%x has unknown bits",
                      attr->comp_mask);
  }
  constexpr uint32_t kRequired = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  if ((attr->comp_mask & kRequired) != kRequired) {
    Log("ibv_open_xrcd: comp_mask needs IBV_XRCD_INIT_ATTR_FD and IBV_XRCD_INIT_ATTR_OFLAGS");
    return FailNull<ibv_xrcd>(EINVAL);
  }
  if (attr->fd != -1 && fcntl(attr->fd, F_GETFD) < 0) {
    Log("ibv_open_xrcd: fd %d is not an open descriptor", attr->fd);
    return FailNull<ibv_xrcd>(EBADF);
  }
  Context* ctx = Context::From(context);
  protocol::OpenXrcdRequest req{attr->fd != -1 ? 1u : 0u, static_cast<uint32_t>(attr->oflags)};
  protocol::OpenXrcdReply rep{};
  int err = attr->fd != -1 ? ctx->channel.Call(protocol::Op::kOpenXrcd, &req, sizeof(req), &rep,
                                               sizeof(rep), &attr->fd, 1)
                           : ctx->channel.Call(protocol::Op::kOpenXrcd, req, &rep);
  if (err) return FailNull<ibv_xrcd>(err);
  auto* xrcd = new Xrcd{};
  xrcd->handle = rep.handle;
  xrcd->ibv.context = context;
  return &xrcd->ibv;
}

int CloseXrcdOp(ibv_xrcd* xrcd) {
  if (!xrcd) return Reject(EINVAL, "ibv_close_xrcd: xrcd is NULL");
  Xrcd* x = FromPublic<Xrcd>(xrcd);
  protocol::HandleRequest req{x->handle, 0};
  if (int err = Context::From(xrcd->context)->channel.Call(protocol::Op::kCloseXrcd, req)) {
    return err;
  }
  delete x;
  return 0;
}

}  // namespace softverbs::provider
