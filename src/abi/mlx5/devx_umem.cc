// mlx5dv_devx_umem_reg/_reg_ex/_dereg. The kernel pins the range and runs
// CREATE_UMEM; softverbs' daemon records {id -> range} instead (spec §2.6) and
// the firmware checks that DEVX objects name UMEMs of their own context. The
// memory is not shared with the daemon: the DEVX data path runs in this
// process. Deregistering a UMEM a DEVX object still uses fails with EBUSY.
// The library remembers each UMEM's range: the DEVX data path finds queue
// buffers and doorbell records in them (devx_queues.cc).
#include <new>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"

using softverbs::mlx5::CallDaemon;
using softverbs::mlx5::Reject;
using softverbs::mlx5::RejectNull;
using softverbs::mlx5::ReturnErrno;

namespace {

struct Umem {
  mlx5dv_devx_umem pub;  // first: the caller holds a pointer to it
  ibv_context* context;
};

}  // namespace

SV_MLX5_EXPORT mlx5dv_devx_umem* mlx5dv_devx_umem_reg(ibv_context* context, void* addr, size_t size,
                                                      uint32_t access) {
  if (context == nullptr) return RejectNull(EINVAL, "mlx5dv_devx_umem_reg: context is NULL");
  // What the kernel checks before it pins the range (the daemon checks the
  // size and flags again).
  if (int err = softverbs_check_umem(addr, size, access)) {
    errno = err;
    return nullptr;
  }
  const softverbs::protocol::DevxUmemRegRequest req{reinterpret_cast<uintptr_t>(addr), size, access,
                                                    0};
  softverbs::protocol::DevxUmemRegReply rep{};
  if (int err = CallDaemon(context, softverbs::protocol::Op::kDevxUmemReg, &req, sizeof(req), &rep,
                           sizeof(rep))) {
    errno = err;
    return nullptr;
  }
  auto* umem = new (std::nothrow) Umem{{rep.umem_id}, context};
  if (umem == nullptr) {
    const softverbs::protocol::DevxUmemDeregRequest undo{rep.umem_id, 0};
    CallDaemon(context, softverbs::protocol::Op::kDevxUmemDereg, &undo, sizeof(undo), nullptr, 0);
    return RejectNull(ENOMEM, "mlx5dv_devx_umem_reg: out of memory for the UMEM");
  }
  softverbs::mlx5::NoteUmem(context, rep.umem_id, addr, size);
  softverbs_note_umems(+1);
  return &umem->pub;
}

SV_MLX5_EXPORT mlx5dv_devx_umem* mlx5dv_devx_umem_reg_ex(ibv_context* context,
                                                         mlx5dv_devx_umem_in* in) {
  if (in == nullptr) return RejectNull(EINVAL, "mlx5dv_devx_umem_reg_ex: in is NULL");
  // dma-buf UMEMs need a kernel; other comp_mask bits do not exist.
  if (in->comp_mask & ~uint64_t{MLX5DV_UMEM_MASK_DMABUF}) {
    return RejectNull(EOPNOTSUPP, "mlx5dv_devx_umem_reg_ex: comp_mask 0x%llx has unknown bits",
                      static_cast<unsigned long long>(in->comp_mask));
  }
  if (in->comp_mask & MLX5DV_UMEM_MASK_DMABUF) {
    return RejectNull(EOPNOTSUPP, "mlx5dv_devx_umem_reg_ex: dma-buf UMEMs need a kernel");
  }
  // The page-size bitmap only constrains how the kernel splits the range,
  // which the emulation never does; but as the kernel, it must offer a page
  // size of 4 KiB or more (devx_umem_find_best_pgsize).
  if ((in->pgsz_bitmap & ~uint64_t{4095}) == 0) {
    return RejectNull(EINVAL,
                      "mlx5dv_devx_umem_reg_ex: pgsz_bitmap 0x%llx offers no page size of 4 KiB "
                      "or more",
                      static_cast<unsigned long long>(in->pgsz_bitmap));
  }
  return mlx5dv_devx_umem_reg(context, in->addr, in->size, in->access);
}

SV_MLX5_EXPORT int mlx5dv_devx_umem_dereg(mlx5dv_devx_umem* dv_umem) {
  if (dv_umem == nullptr) return Reject(EINVAL, "mlx5dv_devx_umem_dereg: umem is NULL");
  auto* umem = reinterpret_cast<Umem*>(dv_umem);
  const softverbs::protocol::DevxUmemDeregRequest req{umem->pub.umem_id, 0};
  if (int err = CallDaemon(umem->context, softverbs::protocol::Op::kDevxUmemDereg, &req,
                           sizeof(req), nullptr, 0)) {
    return ReturnErrno(err);
  }
  softverbs::mlx5::ForgetUmem(umem->pub.umem_id);
  softverbs_note_umems(-1);
  delete umem;
  return 0;
}
