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
                                             uint32_t create_flags) {
  if (pd == nullptr) return RejectNull(EINVAL, "mlx5dv_create_mkey: pd is NULL");
  Context* ctx = Context::From(pd->context);
  uint32_t flags = 0;
  if (create_flags & MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE) {
    flags |= protocol::kMkeyRemoteInvalidate;
  }
  if (create_flags & MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE) {
    flags |= protocol::kMkeySignature;
  }
  protocol::CreateMkeyRequest req{FromPublic<Pd>(pd)->handle, max_entries, flags};
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
  mkey->signature = (flags & protocol::kMkeySignature) != 0;
  return &mkey->dv;
}

SV_EXPORT int softverbs_mkey_sig_error(mlx5dv_mkey* dv, int* has_error,
                                       softverbs_sig_error* error) {
  if (dv == nullptr || has_error == nullptr || error == nullptr) {
    return Reject(EINVAL, "mlx5dv_mkey_check: mkey or err_info is NULL");
  }
  Mkey* mkey = MkeyOf(dv);
  if (!mkey->signature) {
    return Reject(EINVAL,
                  "mlx5dv_mkey_check: memory key 0x%x was created without "
                  "MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE",
                  dv->lkey);
  }
  protocol::HandleRequest req{mkey->handle, 0};
  protocol::CheckMkeyReply rep{};
  if (int err =
          mkey->ctx->channel.Call(protocol::Op::kCheckMkey, &req, sizeof(req), &rep, sizeof(rep))) {
    return err;
  }
  *has_error = rep.has_error ? 1 : 0;
  *error = {rep.error.domain,   rep.error.syndrome, rep.error.kind,
            rep.error.expected, rep.error.actual,   rep.error.offset};
  return 0;
}

SV_EXPORT int softverbs_destroy_mkey(mlx5dv_mkey* dv) {
  if (dv == nullptr) return Reject(EINVAL, "mlx5dv_destroy_mkey: mkey is NULL");
  Mkey* mkey = MkeyOf(dv);
  protocol::HandleRequest req{mkey->handle, 0};
  if (int err = mkey->ctx->channel.Call(protocol::Op::kDestroyMkey, req)) return err;
  delete mkey;
  return 0;
}
