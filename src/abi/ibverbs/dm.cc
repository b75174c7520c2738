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
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <utility>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/mr_backing.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/register_mr.h"
#include "abi/ibverbs/reject.h"
#include "common/device_limits.h"
#include "common/no_destructor.h"

namespace softverbs::provider {
namespace {

namespace lim = softverbs::limits;

// The allocation's pages in this process; shared by the Dm of the
// allocating context and those of contexts that imported it.
struct DmPages {
  uint8_t* bytes = nullptr;
  size_t mapped = 0;  // bytes mapped (whole pages)
  ~DmPages() {
    if (bytes) munmap(bytes, mapped);
  }
};

struct Dm {
  ibv_dm ibv;  // first
  Handle handle;
  uint8_t* bytes;   // pages->bytes
  uint64_t length;  // what the application asked for
  std::shared_ptr<DmPages> pages;
};

// The live allocations of this process by (client, handle), for
// ibv_import_dm from a context sharing the allocator's connection.
std::mutex dm_registry_mutex;
NoDestructor<std::map<std::pair<uint32_t, Handle>, std::weak_ptr<DmPages>>> dm_registry;

void FillDm(Dm* dm, ibv_context* context, Handle handle, uint64_t length,
            std::shared_ptr<DmPages> pages);

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
  std::shared_ptr<DmPages> pages;
  if (bytes != MAP_FAILED) {
    pages = std::shared_ptr<DmPages>(new (std::nothrow) DmPages{});
    if (pages) {
      pages->bytes = static_cast<uint8_t*>(bytes);
      pages->mapped = mapped;
    } else {
      munmap(bytes, mapped);
    }
  }
  auto* dm = pages ? new (std::nothrow) Dm{} : nullptr;
  if (!dm) {
    pages.reset();
    protocol::HandleRequest undo{rep.handle, 0};
    ctx->channel.Call(protocol::Op::kFreeDm, undo);
    return RejectNull(ENOMEM, "ibv_alloc_dm: cannot map %zu bytes", mapped);
  }
  {
    std::lock_guard lock(dm_registry_mutex);
    (*dm_registry)[{ctx->client_id, rep.handle}] = pages;
  }
  FillDm(dm, context, rep.handle, attr->length, std::move(pages));
  return &dm->ibv;
}

int FreeDmOp(ibv_dm* ibdm) {
  if (!ibdm) return Reject(EINVAL, "ibv_free_dm: dm is NULL");
  Dm* dm = FromDm(ibdm);
  Context* ctx = Context::From(ibdm->context);
  protocol::HandleRequest req{dm->handle, 0};
  if (int err = ctx->channel.Call(protocol::Op::kFreeDm, req)) return err;
  {
    std::lock_guard lock(dm_registry_mutex);
    dm_registry->erase({ctx->client_id, dm->handle});
  }
  delete dm;  // the pages go with the last Dm holding them
  return 0;
}

namespace {

void FillDm(Dm* dm, ibv_context* context, Handle handle, uint64_t length,
            std::shared_ptr<DmPages> pages) {
  dm->handle = handle;
  dm->bytes = pages->bytes;
  dm->length = length;
  dm->pages = std::move(pages);
  dm->ibv.context = context;
  dm->ibv.memcpy_to_dm = MemcpyToDm;
  dm->ibv.memcpy_from_dm = MemcpyFromDm;
  dm->ibv.comp_mask = IBV_DM_MASK_HANDLE;
  dm->ibv.handle = handle;
}

}  // namespace

ibv_mr* RegDmMrOp(ibv_pd* pd, ibv_dm* ibdm, uint64_t offset, size_t length, unsigned access) {
  if (!pd || !ibdm) return RejectNull(EINVAL, "ibv_reg_dm_mr: %s is NULL", !pd ? "pd" : "dm");
  if (ibdm->context != pd->context) {
    return RejectNull(EINVAL, "ibv_reg_dm_mr: the device memory belongs to another context");
  }
  // The device checks the rest (access, zero-based, inside the allocation).
  Dm* dm = FromDm(ibdm);
  const bool inside = offset <= dm->length && length <= dm->length - offset;
  uint8_t* addr = dm->bytes + (inside ? offset : 0);
  SelfMaps maps;
  MrBacking backing = inside && length ? AcquireMrBacking(maps, addr, length) : MrBacking{};
  protocol::RegDmMrRequest req{};
  req.mr.reg = {FromPublic<Pd>(pd)->handle, access, reinterpret_cast<uint64_t>(addr), length, 0};
  DescribeBacking(backing, &req.mr);
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

using namespace softverbs::provider;
namespace protocol = softverbs::protocol;

// The device memory `dm_handle` of the context this one shares a connection
// with (ibv_import_device): an ibv_dm of its own over the same pages.
SV_EXPORT ibv_dm* ibv_import_dm(ibv_context* context, uint32_t dm_handle) {
  if (!context) return RejectNull(EINVAL, "ibv_import_dm: context is NULL");
  Context* ctx = Context::From(context);
  protocol::HandleRequest req{dm_handle, 0};
  protocol::QueryDmReply rep{};
  if (int err = ctx->channel.Call(protocol::Op::kQueryDm, req, &rep)) {
    return FailNull<ibv_dm>(err);
  }
  std::shared_ptr<DmPages> pages;
  {
    std::lock_guard lock(dm_registry_mutex);
    auto it = dm_registry->find({ctx->client_id, dm_handle});
    if (it != dm_registry->end()) pages = it->second.lock();
  }
  if (!pages) {
    return RejectNull(EINVAL, "ibv_import_dm: device memory %u is not mapped in this process",
                      dm_handle);
  }
  auto* dm = new (std::nothrow) Dm{};
  if (!dm) return RejectNull(ENOMEM, "ibv_import_dm: out of memory for the DM");
  FillDm(dm, context, dm_handle, rep.length, std::move(pages));
  return &dm->ibv;
}

SV_EXPORT void ibv_unimport_dm(ibv_dm* dm) {
  if (!dm) return;
  delete FromDm(dm);
}

SV_EXPORT int softverbs_dm_view(ibv_dm* ibdm, void** buf, uint64_t* length) {
  if (ibdm == nullptr || buf == nullptr || length == nullptr) return EINVAL;
  const Dm* dm = FromDm(ibdm);
  *buf = dm->bytes;
  *length = dm->length;
  return 0;
}
