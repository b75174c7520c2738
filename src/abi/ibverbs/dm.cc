// Device memory: ibv_alloc_dm / ibv_free_dm, ibv_memcpy_to_dm /
// ibv_memcpy_from_dm and ibv_reg_dm_mr.
//
// The daemon owns the device's capacity (limits::kMaxDmSize for every context
// together); the bytes of an allocation are pages of the allocating process,
// hidden from the application as a NIC's on-chip memory is: it reaches them
// only through the memcpy verbs and through MRs registered on them. Those MRs
// are zero-based (keys address the DM MR from 0, as on hardware) and are
// ordinary MRs to the data path, so peers read, write and run atomics on them
// as on any registered memory. The rules are mlx5's: copies move whole 4-byte
// words (offset and length multiples of 4, else EINVAL; past the end EFAULT);
// DM MRs must be IBV_ACCESS_ZERO_BASED and inside the allocation (EINVAL);
// a DM with MRs on it cannot be freed (EBUSY), as the kernel's usecnt rule.
// The device (daemon) checks the DM MR and freeing rules; DM MRs may be empty
// (length 0), as on mlx5.
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/mr_backing.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/register_mr.h"
#include "abi/ibverbs/reject.h"
#include "common/device_limits.h"

namespace softverbs::provider {
namespace {

namespace lim = softverbs::limits;

struct Dm {
  ibv_dm ibv;  // first
  Handle handle;
  uint8_t* bytes;   // the allocation's pages in this process
  uint64_t length;  // what the application asked for
  size_t mapped;    // bytes mapped (whole pages)
};

Dm* FromDm(ibv_dm* dm) {
  return reinterpret_cast<Dm*>(dm);
}

int CheckCopy(const char* verb, const Dm* dm, uint64_t offset, size_t length) {
  if (offset > dm->length || length > dm->length - offset) {
    return Reject(EFAULT, "%s: [%lu, +%zu) is outside the %lu bytes of device memory", verb,
                  static_cast<unsigned long>(offset), length,
                  static_cast<unsigned long>(dm->length));
  }
  if ((offset | length) % lim::kDmAccessGranule) {
    return Reject(EINVAL, "%s: offset %lu and length %zu must be multiples of %lu bytes", verb,
                  static_cast<unsigned long>(offset), length,
                  static_cast<unsigned long>(lim::kDmAccessGranule));
  }
  return 0;
}

// Device memory is read and written a 4-byte word at a time, as mlx5 does
// over its BAR: a peer's concurrent RDMA never sees a torn word.
void CopyWords(uint32_t* to, const uint32_t* from, size_t words, bool to_dm) {
  for (size_t i = 0; i < words; ++i) {
    if (to_dm) {
      std::atomic_ref<uint32_t>(to[i]).store(from[i], std::memory_order_relaxed);
    } else {
      to[i] = std::atomic_ref<const uint32_t>(from[i]).load(std::memory_order_relaxed);
    }
  }
}

int MemcpyToDm(ibv_dm* ibdm, uint64_t offset, const void* host, size_t length) {
  Dm* dm = FromDm(ibdm);
  if (int err = CheckCopy("ibv_memcpy_to_dm", dm, offset, length)) return err;
  CopyWords(reinterpret_cast<uint32_t*>(dm->bytes + offset), static_cast<const uint32_t*>(host),
            length / 4, true);
  return 0;
}

int MemcpyFromDm(void* host, ibv_dm* ibdm, uint64_t offset, size_t length) {
  Dm* dm = FromDm(ibdm);
  if (int err = CheckCopy("ibv_memcpy_from_dm", dm, offset, length)) return err;
  CopyWords(static_cast<uint32_t*>(host), reinterpret_cast<const uint32_t*>(dm->bytes + offset),
            length / 4, false);
  return 0;
}

}  // namespace

ibv_dm* AllocDmOp(ibv_context* context, ibv_alloc_dm_attr* attr) {
  if (!context || !attr) {
    return RejectNull(EINVAL, "ibv_alloc_dm: %s is NULL", !context ? "context" : "attr");
  }
  if (attr->comp_mask != 0) {
    return RejectNull(EINVAL, "ibv_alloc_dm: comp_mask 0x%x has unknown bits", attr->comp_mask);
  }
  Context* ctx = Context::From(context);
  protocol::AllocDmRequest req{attr->length, attr->log_align_req, 0};
  protocol::AllocDmReply rep{};
  if (int err = ctx->channel.Call(protocol::Op::kAllocDm, &req, sizeof(req), &rep, sizeof(rep))) {
    return FailNull<ibv_dm>(err);
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (rep.size + page - 1) / page * page;
  void* bytes = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  auto* dm = bytes == MAP_FAILED ? nullptr : new (std::nothrow) Dm{};
  if (!dm) {
    if (bytes != MAP_FAILED) munmap(bytes, mapped);
    protocol::HandleRequest undo{rep.handle, 0};
    ctx->channel.Call(protocol::Op::kFreeDm, undo);
    return RejectNull(ENOMEM, "ibv_alloc_dm: cannot map %zu bytes", mapped);
  }
  dm->handle = rep.handle;
  dm->bytes = static_cast<uint8_t*>(bytes);
  dm->length = attr->length;
  dm->mapped = mapped;
  dm->ibv.context = context;
  dm->ibv.memcpy_to_dm = MemcpyToDm;
  dm->ibv.memcpy_from_dm = MemcpyFromDm;
  dm->ibv.comp_mask = IBV_DM_MASK_HANDLE;
  dm->ibv.handle = rep.handle;
  return &dm->ibv;
}

int FreeDmOp(ibv_dm* ibdm) {
  if (!ibdm) return Reject(EINVAL, "ibv_free_dm: dm is NULL");
  Dm* dm = FromDm(ibdm);
  protocol::HandleRequest req{dm->handle, 0};
  if (int err = Context::From(ibdm->context)->channel.Call(protocol::Op::kFreeDm, req)) return err;
  munmap(dm->bytes, dm->mapped);
  delete dm;
  return 0;
}

ibv_mr* RegDmMrOp(ibv_pd* pd, ibv_dm* ibdm, uint64_t offset, size_t length, unsigned access) {
  if (!pd || !ibdm) return RejectNull(EINVAL, "ibv_reg_dm_mr: %s is NULL", !pd ? "pd" : "dm");
  if (ibdm->context != pd->context) {
    return RejectNull(EINVAL, "ibv_reg_dm_mr: the device memory belongs to another context");
  }
  // The device checks the rest (access, zero-based, inside the allocation).
  Dm* dm = FromDm(ibdm);
  const bool inside = offset <= dm->length && length <= dm->length - offset;
  uint8_t* addr = dm->bytes + (inside ? offset : 0);
  MrBacking backing = inside && length ? AcquireMrBacking(addr, length) : MrBacking{};
  protocol::RegDmMrRequest req{};
  req.mr.reg = {FromPublic<Pd>(pd)->handle, access, reinterpret_cast<uint64_t>(addr), length, 0};
  req.mr.backed_begin = backing.begin;
  req.mr.backed_end = backing.end;
  req.mr.backed_offset = backing.offset;
  req.dm = dm->handle;
  req.dm_offset = offset;
  protocol::RegMrReply rep{};
  if (int err = Context::From(pd->context)
                    ->channel.Call(protocol::Op::kRegDmMr, &req, sizeof(req), &rep, sizeof(rep),
                                   backing.id ? &backing.fd : nullptr, backing.id ? 1 : 0)) {
    ReleaseMrBacking(backing.id);
    return FailNull<ibv_mr>(err);
  }
  ibv_mr* mr = MakeMr(pd, rep, backing.id, access, addr, length);
  if (mr) mr->addr = nullptr;  // the DM's mapping stays hidden, as rdma-core's ibv_cmd_reg_dm_mr
  return mr;
}

}  // namespace softverbs::provider
