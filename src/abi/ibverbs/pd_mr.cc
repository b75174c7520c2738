// Protection domains and memory regions.
#include <errno.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <vector>

#include "abi/ibverbs/execution_gate.h"
#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/fork_state.h"
#include "abi/ibverbs/live_mr_ranges.h"
#include "abi/ibverbs/mr_backing.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/parent_domain.h"
#include "abi/ibverbs/peers.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/ready_backings.h"
#include "abi/ibverbs/register_mr.h"
#include "abi/ibverbs/reject.h"
#include "common/device_limits.h"
#include "common/log.h"
#include "datapath/memory.h"
#include "verbs/mr_rules.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace softverbs::provider {
namespace {

// The kernel pins the pages of a registration and fails with EFAULT when part
// of the range is not mapped, or not readable (writable when the access asks
// for writes); the process's own map gives the same answer without pinning,
// and keeps the backing copy from faulting on a PROT_NONE page.
bool RangeIsAccessible(SelfMaps& maps, const void* addr, size_t length, unsigned access) {
  const bool need_write =
      access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  return MemoryIsAccessible(maps, reinterpret_cast<uintptr_t>(addr), length, need_write);
}

// Checks what the kernel checks before it pins anything: the PD, the iova's
// offset in its page against the address's, the length against max_mr_size
// and the access flags. Returns 0 or the errno.
int CheckRegistration(SelfMaps& maps, ibv_pd* pd, const void* addr, size_t length, uint64_t iova,
                      unsigned access) {
  if (!pd) return Reject(EINVAL, "ibv_reg_mr: pd is NULL");
  const uint64_t page_mask = static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) - 1;
  if ((reinterpret_cast<uint64_t>(addr) & page_mask) != (iova & page_mask)) {
    return Reject(EINVAL,
                  "ibv_reg_mr_iova: iova 0x%llx and addr %p lie at different offsets in "
                  "their pages",
                  static_cast<unsigned long long>(iova), addr);
  }
  const verbs::MrRuleVerdict v = verbs::CheckMrRegistration(reinterpret_cast<uint64_t>(addr),
                                                            length, access, limits::kMaxMrSize);
  if (!v.ok()) {
    Log("ibv_reg_mr: %s", v.why.c_str());
    return v.err;
  }
  // A non-dumpable process (PR_SET_DUMPABLE 0) cannot give the device its
  // /proc/self/mem: peers could not reach partial pages or on-demand MRs,
  // so those fail here, explained, rather than later in silence.
  if (!Context::From(pd->context)->has_mem_fd) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<uintptr_t>(addr);
    if ((access & IBV_ACCESS_ON_DEMAND) || begin % page != 0 || length % page != 0) {
      Log("ibv_reg_mr: this process is not dumpable (PR_SET_DUMPABLE 0), so the device "
          "cannot reach its memory through /proc/self/mem: only whole pages, not on demand, "
          "can be registered ([%p, +%zu) is not)",
          addr, length);
      return EPERM;
    }
  }
  // On-demand paging: nothing is pinned or copied; the range need not be
  // mapped yet (an access to a page that is not mapped then fails).
  if (access & IBV_ACCESS_ON_DEMAND) return 0;
  if (!addr || !RangeIsAccessible(maps, addr, length, access)) {
    Log("ibv_reg_mr: [%p, +%zu) is not mapped memory the access flags allow", addr, length);
    return EFAULT;
  }
  return 0;
}

// Asks the context's watch thread to make memfds ahead (ready_backings.h).
void WakeReadyBackingMaker(void* context) {
  const uint64_t one = 1;
  const ssize_t n = write(static_cast<Context*>(context)->ready_backings_fd, &one, sizeof(one));
  (void)n;
}

}  // namespace

ibv_mr* RegisterMr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  // Before any backing work: the backing copies the whole range. One view
  // of the mappings serves both.
  SelfMaps maps;
  if (int err = CheckRegistration(maps, pd, addr, length, iova, access)) {
    return FailNull<ibv_mr>(err);
  }
  Context* ctx = Context::From(pd->context);
  // libibverbs calls ibv_dontfork_range here (not for on-demand MRs).
  if (!(access & IBV_ACCESS_ON_DEMAND)) NoteRangeRegistered();
  protocol::RegMrBackedRequest req{};
  req.reg = {FromPublic<Pd>(pd)->handle, access, reinterpret_cast<uint64_t>(addr), length, iova};
  // The data path: whole pages become shared memory peers can map (not for
  // on-demand MRs, reached through the owner's /proc/self/mem at access).
  const BackingOffer offer{
      [](void* context, int memfd) {
        return static_cast<Context*>(context)->channel.OfferBacking(memfd) == 0;
      },
      ctx, ctx->ready_backings_fd >= 0 ? WakeReadyBackingMaker : nullptr,
      [](void* context) { static_cast<Context*>(context)->channel.WakeAhead(); }};
  MrBacking backing = (access & IBV_ACCESS_ON_DEMAND)
                          ? MrBacking{}
                          : AcquireMrBacking(maps, addr, length, ctx->keeper, &offer);
  // Ranges the cache let go of meanwhile: before the registration (until
  // session 33 the library's close of their memfds, after this call, freed
  // their pages, and the daemon, asleep after a long close, took 80-200 us
  // to wake for the registration; now its release thread frees them).
  SendForgottenBackings(ctx);
  if (!ctx->has_mem_fd && !backing.backed()) {
    // Not dumpable and no shared backing (memory that cannot be remapped,
    // or pages another registration holds differently): unreachable.
    ReleaseMrBacking(backing.id);
    SendForgottenBackings(ctx);
    return RejectNull(EPERM,
                      "ibv_reg_mr: this process is not dumpable and [%p, +%zu) cannot be "
                      "backed with shared memory: peers could not reach it",
                      addr, length);
  }
  protocol::RegMrReply rep{};
  auto call = [&] {
    DescribeBacking(backing, &req);
    return ctx->channel.Call(protocol::Op::kRegMrBacked, &req, sizeof(req), &rep, sizeof(rep),
                             backing.passes_fd() ? &backing.fd : nullptr,
                             backing.passes_fd() ? 1 : 0);
  };
  int err = call();
  if (err == ESTALE && backing.device_keeps) {
    // The device let go of the memfd it kept for this context (its least
    // recently used ones go first): pass it again.
    NoteBackingKept(backing.id, ctx->keeper, false);
    backing.device_keeps = false;
    err = call();
  }
  if (err) {
    ReleaseMrBacking(backing.id);
    SendForgottenBackings(ctx);
    return FailNull<ibv_mr>(err);
  }
  if (backing.passes_fd()) {
    NoteBackingKept(backing.id, ctx->keeper, rep.flags & protocol::kRegMrBackingKept);
  }
  return MakeMr(pd, rep, backing.id, access, addr, length);
}

void SendForgottenBackings(Context* ctx) {
  const std::vector<protocol::BackingName> names = ForgottenBackings(ctx->keeper);
  if (names.empty()) return;
  protocol::ForgetBackingsRequest req{};
  for (size_t at = 0; at < names.size();) {
    req.count = 0;
    while (at < names.size() && req.count < protocol::ForgetBackingsRequest::kMaxNames) {
      req.names[req.count++] = names[at++];
    }
    // A failure (the device is gone) leaves nothing kept there either.
    ctx->channel.Call(protocol::Op::kForgetBackings, req);
  }
  NoteBackingsForgotten(ctx->keeper, names);
}

ibv_mr* MakeMr(ibv_pd* pd, const protocol::RegMrReply& rep, uint64_t backing_id, unsigned access,
               void* addr, size_t length) {
  auto* mr = new (std::nothrow) Mr{};
  if (!mr) {
    ReleaseMrBacking(backing_id);
    protocol::HandleRequest undo{rep.handle, 0};
    Context::From(pd->context)->channel.Call(protocol::Op::kDeregMr, undo);
    return RejectNull(ENOMEM, "ibv_reg_mr: out of memory for the MR");
  }
  mr->handle = rep.handle;
  mr->backing_id = backing_id;
  mr->access = access;
  mr->ibv.context = pd->context;
  mr->ibv.pd = pd;
  mr->ibv.addr = addr;
  mr->ibv.length = length;
  mr->ibv.handle = rep.handle;
  mr->ibv.lkey = rep.lkey;
  mr->ibv.rkey = rep.rkey;
  NoteMrRange(reinterpret_cast<uint64_t>(addr), length);
  mr->range_noted = true;
  return &mr->ibv;
}

namespace {

// Waits until no peer is inside an access of the MR: `inside` is how many
// accesses other contexts were inside when the daemon cleared the keys (the
// sum of their access records' counts, DeregMrReply); a peer not counted
// there sees the keys cleared. Bounded by the clock (kDeregWaitNs): a
// stopped peer may never leave. Accesses by this process itself are not
// counted: it waits for the executions in progress in its other threads
// (the execution gate's grace period, whose barrier comes after the daemon
// cleared the keys: an execution that began later sees them cleared).
constexpr int64_t kDeregWaitNs = 2'000'000'000;  // docs/datapath.md

// How many accesses of the slot live peers are inside, by their access
// records (the daemon sums them); UINT32_MAX if it cannot say.
uint32_t LivePeersInside(Context* ctx, uint32_t lkey) {
  protocol::MrPeersInsideRequest req{lkey, 0};
  protocol::MrPeersInsideReply rep{};
  if (ctx->channel.Call(protocol::Op::kMrPeersInside, req, &rep) != 0) return UINT32_MAX;
  return rep.inside;
}

int64_t NsSince(const timespec& start) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - start.tv_sec) * 1'000'000'000LL + (now.tv_nsec - start.tv_nsec);
}

void WaitForPeersToLeave(Context* ctx, uint32_t lkey, uint32_t inside) {
  if (!ExecutionGate::Inside() && !ExecutionGate::WaitForExecutions(kDeregWaitNs)) {
    Log("ibv_dereg_mr: key 0x%x: a thread of this process stayed inside an execution for %lld ms "
        "(it is stopped?); the MR is deregistered without it",
        lkey, static_cast<long long>(kDeregWaitNs / 1'000'000));
  }
  if (inside == 0) return;
  // A peer's access of a few bytes ends in microseconds, a large WRITE's
  // copy in milliseconds: ask again after 20 us, then less and less often.
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  useconds_t pause_us = 20;
  for (;;) {
    usleep(pause_us);
    pause_us = std::min<useconds_t>(pause_us * 2, 1000);
    inside = LivePeersInside(ctx, lkey);
    if (inside == 0) return;
    const int64_t waited_ns = NsSince(start);
    if (inside == UINT32_MAX || waited_ns >= kDeregWaitNs) {
      Log("ibv_dereg_mr: a peer stayed inside an access of key 0x%x for %lld ms (it is "
          "stopped?); the MR is deregistered without it",
          lkey, static_cast<long long>(waited_ns / 1'000'000));
      return;
    }
  }
}

}  // namespace

// ibv_advise_mr(3): prefetching an on-demand MR's pages. Nothing needs to
// happen ahead (every access reaches the page as it is at that moment), so
// the verb checks what the kernel and libmlx5 check and succeeds: the PD,
// the advice and flags, and that each SGE lies inside an on-demand MR of
// the PD (EINVAL: no such MR or not on demand; EFAULT: out of its bounds).
int AdviseMrOp(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
               uint32_t num_sge) {
  if (!pd) return Reject(EINVAL, "ibv_advise_mr: pd is NULL");
  if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) {
    return Reject(EOPNOTSUPP, "ibv_advise_mr: advice %d is not a prefetch",
                  static_cast<int>(advice));
  }
  if (flags & ~static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) {
    return Reject(EINVAL, "ibv_advise_mr: flags 0x%x has unknown bits", flags);
  }
  if (!sg_list || num_sge == 0) return Reject(EINVAL, "ibv_advise_mr: no SGE");
  Context* ctx = Context::From(pd->context);
  if (!ctx->table.valid()) return Reject(EINVAL, "ibv_advise_mr: the device has no MR table");
  const uint32_t pdn = FromPublic<Pd>(pd)->pdn;
  for (uint32_t i = 0; i < num_sge; ++i) {
    const datapath::MrEntry& e = *ctx->table.MrSlot(sg_list[i].lkey);
    if (!(e.access.load(std::memory_order_relaxed) & IBV_ACCESS_ON_DEMAND)) {
      return Reject(EINVAL, "ibv_advise_mr: SGE %u: lkey 0x%x is not an on-demand MR", i,
                    sg_list[i].lkey);
    }
    uint64_t va = 0;
    switch (datapath::CheckMrAccess(e, sg_list[i].lkey, false, pdn, ctx->group_id, 0,
                                    sg_list[i].addr, sg_list[i].length, &va)) {
      case datapath::MrCheck::kOk:
        break;
      case datapath::MrCheck::kOutOfRange:
        return Reject(EFAULT, "ibv_advise_mr: SGE %u is outside its MR", i);
      default:
        return Reject(EINVAL, "ibv_advise_mr: SGE %u: lkey 0x%x is not an MR of this PD", i,
                      sg_list[i].lkey);
    }
  }
  return 0;
}

}  // namespace softverbs::provider

using namespace softverbs::provider;
using softverbs::Log;
namespace limits = softverbs::limits;
namespace verbs = softverbs::verbs;
namespace protocol = softverbs::protocol;

SV_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
  if (!context) return RejectNull(EINVAL, "ibv_alloc_pd: context is NULL");
  Context* ctx = Context::From(context);
  protocol::AllocPdReply rep{};
  protocol::HandleRequest req{};
  if (int err = ctx->channel.Call(protocol::Op::kAllocPd, req, &rep)) {
    return FailNull<ibv_pd>(err);
  }
  auto* pd = new Pd{};
  pd->ibv.context = context;
  pd->ibv.handle = rep.handle;
  pd->handle = rep.handle;
  pd->pdn = rep.pdn;
  // A PD is what registrations need: the memfds for the first ones are
  // made now, in the context's watch thread (ready_backings.h).
  if (ctx->ready_backings_fd >= 0 && AskForReadyBackings(ctx->keeper)) {
    WakeReadyBackingMaker(ctx);
  }
  return &pd->ibv;
}

SV_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  if (!pd) return Reject(EINVAL, "ibv_dealloc_pd: pd is NULL");
  Pd* p = FromPublic<Pd>(pd);
  if (p->protection_domain) return DeallocParentDomain(p);
  if (int n = p->users.load()) {
    return Reject(EBUSY, "ibv_dealloc_pd: %d parent domain(s) are still built on this PD", n);
  }
  protocol::HandleRequest req{p->handle, 0};
  if (int err = Context::From(pd->context)->channel.Call(protocol::Op::kDeallocPd, req)) {
    return err;
  }
  delete p;
  return 0;
}

SV_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return RegisterMr(pd, addr, length, reinterpret_cast<uint64_t>(addr),
                    static_cast<unsigned>(access));
}

SV_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                  int access) {
  return RegisterMr(pd, addr, length, iova, static_cast<unsigned>(access));
}

SV_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                   unsigned int access) {
  return RegisterMr(pd, addr, length, iova, access);
}

SV_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  if (!mr) return Reject(EINVAL, "ibv_dereg_mr: mr is NULL");
  Mr* m = FromPublic<Mr>(mr);
  Context* ctx = Context::From(mr->context);
  protocol::HandleRequest req{m->handle, 0};
  protocol::DeregMrReply rep{};
  if (int err = ctx->channel.Call(protocol::Op::kDeregMr, req, &rep)) {
    return err;
  }
  // The daemon cleared the keys; a peer that got past its key check before
  // that is still inside an access: wait for it, as hardware finishes its
  // DMA before the deregistration completes.
  WaitForPeersToLeave(ctx, mr->lkey, rep.peers_inside);
  if (m->range_noted) ForgetMrRange(reinterpret_cast<uint64_t>(mr->addr), mr->length);
  ReleaseMrBacking(m->backing_id);
  SendForgottenBackings(ctx);
  delete m;
  return 0;
}

// ibv_rereg_mr(3) and rdma-core's verbs.c: 0, or a negative
// ibv_rereg_mr_err_code with errno set. Bad arguments found before the
// command (an imported MR, unknown flags, a translation without address or
// length, access flags without IBV_REREG_MR_CHANGE_ACCESS) are
// IBV_REREG_MR_ERR_INPUT; a command the device rejects is
// IBV_REREG_MR_ERR_CMD with the command's errno. An address or length
// without IBV_REREG_MR_CHANGE_TRANSLATION is ignored, as the kernel's
// command ignores it. Either way the MR is unchanged (the daemon applies all
// changes or none).
SV_EXPORT int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length,
                           int access) {
  auto input_error = [](const char* why) {
    Log("ibv_rereg_mr: %s", why);
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  };
  auto command_error = [](int err) {
    errno = err;
    return IBV_REREG_MR_ERR_CMD;
  };
  if (!mr) return input_error("mr is NULL");
  if (FromPublic<Mr>(mr)->imported) return input_error("an imported MR cannot be reregistered");
  if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) {
    Log("ibv_rereg_mr: flags 0x%x have unknown bits 0x%x", flags,
        flags & ~IBV_REREG_MR_FLAGS_SUPPORTED);
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  const bool translate = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
  if (translate && (!addr || length == 0)) {
    return input_error("IBV_REREG_MR_CHANGE_TRANSLATION needs an address and a length");
  }
  if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) {
    return input_error("access flags without IBV_REREG_MR_CHANGE_ACCESS");
  }
  if (!translate) {
    addr = nullptr;
    length = 0;
  }
  // What the kernel's command checks, in its order.
  if (flags == 0) {
    Log("ibv_rereg_mr: flags is 0: nothing to change");
    return command_error(EINVAL);
  }
  if ((flags & IBV_REREG_MR_CHANGE_PD) && !pd) {
    Log("ibv_rereg_mr: IBV_REREG_MR_CHANGE_PD with a NULL pd");
    return command_error(EINVAL);
  }
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
    verbs::MrRuleVerdict v = verbs::CheckMrAccess(static_cast<unsigned>(access));
    if (!v.ok()) {
      Log("ibv_rereg_mr: %s", v.why.c_str());
      return command_error(v.err);
    }
  }
  if (translate) {
    verbs::MrRuleVerdict v =
        verbs::CheckMrRange(reinterpret_cast<uint64_t>(addr), length, limits::kMaxMrSize);
    if (!v.ok()) {
      Log("ibv_rereg_mr: %s", v.why.c_str());
      return command_error(v.err);
    }
    const unsigned new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? static_cast<unsigned>(access)
                                                                     : FromPublic<Mr>(mr)->access;
    SelfMaps maps;
    if (!RangeIsAccessible(maps, addr, length, new_access)) {
      Log("ibv_rereg_mr: [%p, +%zu) is not mapped memory", addr, length);
      return command_error(EFAULT);
    }
  }
  Mr* m = FromPublic<Mr>(mr);
  protocol::ReregMrRequest req{m->handle,
                               static_cast<uint32_t>(flags),
                               (flags & IBV_REREG_MR_CHANGE_PD) ? FromPublic<Pd>(pd)->handle : 0,
                               static_cast<uint32_t>(access),
                               reinterpret_cast<uint64_t>(addr),
                               length};
  protocol::RegMrReply rep{};
  if (int err = Context::From(mr->context)->channel.Call(protocol::Op::kReregMr, req, &rep)) {
    return command_error(err);
  }
  if (flags & IBV_REREG_MR_CHANGE_PD) mr->pd = pd;
  if (translate) {
    // Peers reached the old range until the daemon's answer, the new one
    // from then on: noted before the old one is forgotten.
    if (m->range_noted) {
      NoteMrRange(reinterpret_cast<uint64_t>(addr), length);
      ForgetMrRange(reinterpret_cast<uint64_t>(mr->addr), mr->length);
    }
    mr->addr = addr;
    mr->length = length;
  }
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) m->access = static_cast<unsigned>(access);
  mr->lkey = rep.lkey;
  mr->rkey = rep.rkey;
  return 0;
}
