// mlx5dv_devx_obj_create/query/modify/destroy and mlx5dv_devx_general_cmd
// (mlx5dv_devx_obj_create(3)): the boxes go to the daemon's firmware as they
// are. Conventions, as rdma-core's: create returns NULL and sets errno;
// the others return the errno value. A command the firmware ran and failed
// is EREMOTEIO with the out box's status and syndrome filled in.
#include <new>

#include "abi/mlx5/devx_internal.h"

using softverbs::mlx5::Reject;
using softverbs::mlx5::RejectNull;
using softverbs::mlx5::ReturnErrno;
using softverbs::mlx5::RunDevxCommand;
using softverbs::protocol::DevxEntryPoint;

SV_MLX5_EXPORT mlx5dv_devx_obj* mlx5dv_devx_obj_create(ibv_context* context, const void* in,
                                                       size_t inlen, void* out, size_t outlen) {
  uint64_t handle = 0;
  const int err =
      RunDevxCommand(context, DevxEntryPoint::kObjCreate, 0, in, inlen, out, outlen, &handle);
  if (err) {
    errno = err;
    return nullptr;
  }
  auto* obj = new (std::nothrow) mlx5dv_devx_obj{context, handle};
  if (obj == nullptr) {
    // The object exists in the firmware; do not leak it there.
    mlx5dv_devx_obj orphan{context, handle};
    mlx5dv_devx_obj_destroy(&orphan);
    return RejectNull(ENOMEM, "mlx5dv_devx_obj_create: out of memory for the object");
  }
  softverbs::mlx5::NoteDevxCreated(context, in, inlen, handle);
  return obj;
}

SV_MLX5_EXPORT int mlx5dv_devx_obj_query(mlx5dv_devx_obj* obj, const void* in, size_t inlen,
                                         void* out, size_t outlen) {
  if (obj == nullptr) return Reject(EINVAL, "mlx5dv_devx_obj_query: obj is NULL");
  return ReturnErrno(
      RunDevxCommand(obj->context, DevxEntryPoint::kObjQuery, obj->handle, in, inlen, out, outlen));
}

SV_MLX5_EXPORT int mlx5dv_devx_obj_modify(mlx5dv_devx_obj* obj, const void* in, size_t inlen,
                                          void* out, size_t outlen) {
  if (obj == nullptr) return Reject(EINVAL, "mlx5dv_devx_obj_modify: obj is NULL");
  const int err =
      RunDevxCommand(obj->context, DevxEntryPoint::kObjModify, obj->handle, in, inlen, out, outlen);
  if (err == 0) softverbs::mlx5::NoteDevxModified(obj->context, in, inlen, obj->handle);
  return ReturnErrno(err);
}

SV_MLX5_EXPORT int mlx5dv_devx_obj_destroy(mlx5dv_devx_obj* obj) {
  if (obj == nullptr) return Reject(EINVAL, "mlx5dv_devx_obj_destroy: obj is NULL");
  const softverbs::protocol::DevxDestroyRequest req{obj->handle};
  if (int err = softverbs::mlx5::CallDaemon(obj->context, softverbs::protocol::Op::kDevxDestroy,
                                            &req, sizeof(req), nullptr, 0)) {
    return ReturnErrno(err);  // e.g. EBUSY: still used; the object stays valid
  }
  softverbs::mlx5::NoteDevxDestroyed(obj->context, obj->handle);
  delete obj;
  return 0;
}

SV_MLX5_EXPORT int mlx5dv_devx_general_cmd(ibv_context* context, const void* in, size_t inlen,
                                           void* out, size_t outlen) {
  return ReturnErrno(
      RunDevxCommand(context, DevxEntryPoint::kGeneralCmd, 0, in, inlen, out, outlen));
}
