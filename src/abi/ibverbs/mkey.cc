// mlx5dv_create_mkey / mlx5dv_destroy_mkey behind libmlx5.so.1
// (softverbs_private.h: softverbs_create_mkey, softverbs_destroy_mkey).
#include "abi/ibverbs/mkey.h"

#include <errno.h>

#include <new>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/softverbs_private.h"

using namespace softverbs::provider;
namespace protocol = softverbs::protocol;

SV_EXPORT mlx5dv_mkey* softverbs_create_mkey(ibv_pd* pd, uint32_t max_entries,
                                             int remote_invalidate) {
  if (pd == nullptr) return RejectNull(EINVAL, "mlx5dv_create_mkey: pd is NULL");
  Context* ctx = Context::From(pd->context);
  protocol::CreateMkeyRequest req{FromPublic<Pd>(pd)->handle, max_entries,
                                  remote_invalidate ? 1u : 0u};
  protocol::CreateMkeyReply rep{};
  if (int err =
          ctx->channel.Call(protocol::Op::kCreateMkey, &req, sizeof(req), &rep, sizeof(rep))) {
    return FailNull<mlx5dv_mkey>(err);
  }
  auto* mkey = new (std::nothrow) Mkey{};
  if (!mkey) {
    protocol::HandleRequest undo{rep.handle, 0};
    ctx->channel.Call(protocol::Op::kDestroyMkey, undo);
    return RejectNull(ENOMEM, "mlx5dv_create_mkey: out of memory");
  }
  mkey->dv.lkey = rep.lkey;
  mkey->dv.rkey = rep.rkey;
  mkey->ctx = ctx;
  mkey->handle = rep.handle;
  mkey->max_entries = max_entries;
  return &mkey->dv;
}

SV_EXPORT int softverbs_destroy_mkey(mlx5dv_mkey* dv) {
  if (dv == nullptr) return Reject(EINVAL, "mlx5dv_destroy_mkey: mkey is NULL");
  Mkey* mkey = MkeyOf(dv);
  protocol::HandleRequest req{mkey->handle, 0};
  if (int err = mkey->ctx->channel.Call(protocol::Op::kDestroyMkey, req)) return err;
  delete mkey;
  return 0;
}
