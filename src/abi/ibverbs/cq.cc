// Completion queues and completion channels.
//
// A completion channel is an eventfd in semaphore mode: each completion event
// adds one, ibv_get_cq_event takes one and pops the CQ that fired, so the fd
// works with poll/epoll and honours O_NONBLOCK set by the application.
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <utility>
#include <vector>

#include "abi/ibverbs/cq_moderation.h"
#include "abi/ibverbs/devx_queues.h"
#include "abi/ibverbs/event_lifetime.h"
#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/mlx5_alloc_type.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/parent_domain.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/send_queue.h"
#include "common/device_limits.h"
#include "common/log.h"
#include "datapath/timers.h"

namespace softverbs::provider {
namespace {

// Work-completion fields softverbs fills (ibv_create_cq_wc_flags).
constexpr uint64_t kSupportedWcFlags =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS |
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK |
    IBV_WC_EX_WITH_TM_INFO;
// The fields that make producers stamp each completion with the device clock.
constexpr uint64_t kTimestampWcFlags =
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

constexpr uint32_t kKnownCqComp = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
constexpr uint32_t kKnownCqFlags =
    IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;

Cq* CqOf(ibv_cq_ex* cq) {
  return FromPublic<Cq>(cq);
}

void ToWc(const datapath::Completion& c, ibv_wc* wc) {
  wc->wr_id = c.wr_id;
  wc->status = static_cast<ibv_wc_status>(c.status);
  wc->opcode = static_cast<ibv_wc_opcode>(c.opcode);
  wc->vendor_err = c.vendor_err;
  wc->byte_len = c.byte_len;
  wc->imm_data = c.imm_data;
  wc->qp_num = c.qp_num;
  wc->src_qp = c.src_qp;
  wc->wc_flags = c.wc_flags;
  wc->pkey_index = 0;  // RoCE: no P_Key index, LID or path bits in a completion
  wc->slid = 0;
  wc->sl = c.sl;
  wc->dlid_path_bits = 0;
}

// The receive queue of QP qpn that completes on cq, or nullptr; under
// cq->receive_queues_lock.
datapath::RecvQueue* FindReceiveQueue(Cq* cq, uint32_t qpn) {
  auto& queues = cq->receive_queues;
  auto it = std::lower_bound(queues.begin(), queues.end(), qpn,
                             [](const auto& entry, uint32_t n) { return entry.first < n; });
  return it != queues.end() && it->first == qpn ? it->second : nullptr;
}

// A polled receive completion that names the WQE it consumed: the WQE's
// queue, if it is the own queue of a QP of this CQ, learns that its slot
// is free (QP numbers come round again only after 2^24 QPs, so a late
// completion of a destroyed QP does not name a new one's queue).
void NoteReceivePolled(Cq* cq, uint32_t qpn, uint32_t recv_wqe) {
  if (recv_wqe == 0) return;
  std::lock_guard lock(cq->receive_queues_lock);
  if (datapath::RecvQueue* rq = FindReceiveQueue(cq, qpn)) {
    rq->NoteConsumed(recv_wqe);
    cq->refilling_qpn = qpn;
  }
}

// An empty poll, under the CQ's consumer lock: the application waits for
// messages, and the queue it refills after the last one takes the line of
// its next slot meanwhile (RecvQueue::OwnNextSlot). A ping-pong of SENDs
// otherwise waited for that line on the way from each message to its
// reply (docs/datapath.md, "Message rate of SEND").
void OwnRefillSlot(Cq* cq) {
  if (cq->refilling_qpn == 0) return;
  const uint32_t qpn = std::exchange(cq->refilling_qpn, 0);
  std::lock_guard lock(cq->receive_queues_lock);
  if (datapath::RecvQueue* rq = FindReceiveQueue(cq, qpn)) rq->OwnNextSlot();
}

// One completion out of the ring, under the CQ's consumer lock.
bool PopCompletion(Cq* cq, datapath::Completion* c) {
  uint32_t recv_wqe = 0;
  if (!cq->ring.Peek(c, &recv_wqe)) return false;
  cq->ring.Pop();
  NoteReceivePolled(cq, c->qp_num, recv_wqe);
  return true;
}

// The extended poll API: start_poll takes the CQ's consumer lock, end_poll
// releases it; each call moves `current` to the next completion.
bool TakeNext(Cq* cq) {
  if (!PopCompletion(cq, &cq->current)) return false;
  cq->ibv.wr_id = cq->current.wr_id;
  cq->ibv.status = static_cast<ibv_wc_status>(cq->current.status);
  return true;
}
int StartPoll(ibv_cq_ex* ex, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) {
    return Reject(EINVAL, "ibv_start_poll: attr->comp_mask 0x%x must be 0", attr->comp_mask);
  }
  Cq* cq = CqOf(ex);
  ProgressContext(Context::From(ex->context));
  cq->poll_lock.lock();
  if (TakeNext(cq)) return 0;
  OwnRefillSlot(cq);
  cq->poll_lock.unlock();
  return ENOENT;
}
int NextPoll(ibv_cq_ex* ex) {
  return TakeNext(CqOf(ex)) ? 0 : ENOENT;
}
void EndPoll(ibv_cq_ex* ex) {
  CqOf(ex)->poll_lock.unlock();
}
ibv_wc_opcode ReadOpcode(ibv_cq_ex* ex) {
  return static_cast<ibv_wc_opcode>(CqOf(ex)->current.opcode);
}
uint32_t ReadVendorErr(ibv_cq_ex* ex) {
  return CqOf(ex)->current.vendor_err;
}
uint32_t ReadByteLen(ibv_cq_ex* ex) {
  return CqOf(ex)->current.byte_len;
}
__be32 ReadImm(ibv_cq_ex* ex) {
  return CqOf(ex)->current.imm_data;
}
uint32_t ReadQpNum(ibv_cq_ex* ex) {
  return CqOf(ex)->current.qp_num;
}
uint32_t ReadSrcQp(ibv_cq_ex* ex) {
  return CqOf(ex)->current.src_qp;
}
unsigned int ReadWcFlags(ibv_cq_ex* ex) {
  return CqOf(ex)->current.wc_flags;
}
uint32_t ReadSlid(ibv_cq_ex*) {
  return 0;  // RoCE: no LID
}
uint8_t ReadSl(ibv_cq_ex* ex) {
  return CqOf(ex)->current.sl;
}
uint8_t ReadDlidPathBits(ibv_cq_ex*) {
  return 0;  // RoCE: no path bits
}
// Tag matching (datapath/tag_matching.h): the matched tag and the TMH's
// app_ctx; 0 for completions that matched no tag.
void ReadTmInfo(ibv_cq_ex* ex, ibv_wc_tm_info* tm_info) {
  tm_info->tag = CqOf(ex)->current.tm_tag;
  tm_info->priv = CqOf(ex)->current.tm_priv;
}
// The device clock counts nanoseconds (hca_core_clock 1 GHz).
uint64_t ReadCompletionTs(ibv_cq_ex* ex) {
  return CqOf(ex)->current.timestamp;
}
// Wall-clock nanoseconds: the device clock moved onto CLOCK_REALTIME by the
// offset between the two clocks now, as libmlx5 converts its HCA clock.
uint64_t ReadCompletionWallclockNs(ibv_cq_ex* ex) {
  timespec real;
  clock_gettime(CLOCK_REALTIME, &real);
  const uint64_t real_ns =
      static_cast<uint64_t>(real.tv_sec) * 1000000000ull + static_cast<uint64_t>(real.tv_nsec);
  return CqOf(ex)->current.timestamp + (real_ns - datapath::DeviceClockNs());
}

ibv_cq_ex* CreateCq(ibv_context* context, uint32_t cqe, void* cq_context, ibv_comp_channel* channel,
                    uint32_t comp_vector, uint64_t wc_flags) {
  Context* ctx = Context::From(context);
  if (int err = CheckMlx5AllocType("CQ", "ibv_create_cq")) return FailNull<ibv_cq_ex>(err);
  protocol::CreateCqRequest req{cqe, comp_vector, wc_flags};
  protocol::CreateCqReply rep{};
  // The channel's eventfd goes to the daemon, which hands it to peers that
  // complete receives on this CQ; the CQ ring comes back.
  std::vector<int> fds;
  const int channel_fd = channel ? channel->fd : -1;
  if (int err =
          ctx->channel.Call(protocol::Op::kCreateCq, &req, sizeof(req), &rep, sizeof(rep),
                            channel ? &channel_fd : nullptr, channel ? 1 : 0, nullptr, &fds)) {
    return FailNull<ibv_cq_ex>(err);
  }
  auto* cq = new Cq{};
  int map_err = fds.empty() ? EPROTO : cq->ring_mapping.Map(fds[0]);
  for (int fd : fds) close(fd);
  if (map_err) {
    delete cq;
    protocol::HandleRequest undo{rep.handle, 0};
    ctx->channel.Call(protocol::Op::kDestroyCq, undo);
    return RejectNull(map_err, "ibv_create_cq: cannot map the CQ ring (%s)", strerror(map_err));
  }
  cq->ring.Attach(cq->ring_mapping.base());
  cq->event_fd = channel_fd;
  cq->handle = rep.handle;
  cq->cqn = rep.cqn;
  cq->wc_flags = wc_flags;
  ibv_cq_ex& ex = cq->ibv;
  ex.context = context;
  ex.channel = channel;
  ex.cq_context = cq_context;
  ex.handle = rep.handle;
  ex.cqe = static_cast<int>(rep.cqe);
  pthread_mutex_init(&ex.mutex, nullptr);
  pthread_cond_init(&ex.cond, nullptr);
  ex.comp_mask = 0;
  ex.start_poll = StartPoll;
  ex.next_poll = NextPoll;
  ex.end_poll = EndPoll;
  ex.read_opcode = ReadOpcode;
  ex.read_vendor_err = ReadVendorErr;
  ex.read_byte_len = ReadByteLen;
  ex.read_imm_data = ReadImm;
  ex.read_qp_num = ReadQpNum;
  ex.read_src_qp = ReadSrcQp;
  ex.read_wc_flags = ReadWcFlags;
  ex.read_slid = ReadSlid;
  ex.read_sl = ReadSl;
  ex.read_dlid_path_bits = ReadDlidPathBits;
  ex.read_completion_ts = ReadCompletionTs;
  ex.read_completion_wallclock_ns = ReadCompletionWallclockNs;
  ex.read_tm_info = ReadTmInfo;
  if (wc_flags & kTimestampWcFlags) {
    // Before any QP can complete on it: producers stamp from now on.
    cq->ring.header()->flags.fetch_or(datapath::kCqStampCompletions, std::memory_order_relaxed);
  }
  if (channel) {
    __atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_SEQ_CST);
    auto* ch = FromPublic<CompChannel>(channel);
    std::lock_guard lock(ch->mutex);
    ch->cqs.push_back(cq);
  }
  ctx->Track(rep.handle, &cq->ibv);
  return &cq->ibv;
}

}  // namespace

int PollCqOp(ibv_cq* ibcq, int num_entries, ibv_wc* wc) {
  // libmlx5 and rxe poll nothing for a negative count (their loop ends at
  // once): 0, not an error.
  if (num_entries < 0) return 0;
  Cq* cq = CqOf(reinterpret_cast<ibv_cq_ex*>(ibcq));
  ProgressContext(Context::From(ibcq->context));
  std::lock_guard lock(cq->poll_lock);
  int n = 0;
  datapath::Completion c;
  while (n < num_entries && PopCompletion(cq, &c)) ToWc(c, &wc[n++]);
  if (n == 0) OwnRefillSlot(cq);
  // An empty poll while the device's network transport works for this
  // context: let it run. Its daemon is what produces these completions, and
  // an application polling in a loop would otherwise hold the core it needs
  // (docs/roce.md, "Who moves the bytes").
  if (n == 0 && Context::From(ibcq->context)->wire_fd.load(std::memory_order_relaxed) >= 0) {
    sched_yield();
  }
  return n;
}

void AttachReceiveQueue(Cq* cq, uint32_t qpn, datapath::RecvQueue* rq) {
  std::lock_guard lock(cq->receive_queues_lock);
  auto& queues = cq->receive_queues;
  auto it = std::lower_bound(queues.begin(), queues.end(), qpn,
                             [](const auto& entry, uint32_t n) { return entry.first < n; });
  queues.insert(it, {qpn, rq});
}

void DetachReceiveQueue(Cq* cq, uint32_t qpn) {
  std::lock_guard lock(cq->receive_queues_lock);
  std::erase_if(cq->receive_queues, [&](const auto& entry) { return entry.first == qpn; });
}

int ReqNotifyCqOp(ibv_cq* ibcq, int solicited_only) {
  Cq* cq = CqOf(reinterpret_cast<ibv_cq_ex*>(ibcq));
  // Without a completion channel the event would go nowhere (libmlx5 arms
  // its CQ all the same; nothing of it can be seen): the CQ stays unarmed,
  // and producers skip the arm hand-off (datapath::Complete).
  if (cq->event_fd < 0) return 0;
  cq->ring.Arm(solicited_only != 0);
  NoteModeratedArm(cq);
  return 0;
}

ibv_cq_ex* CreateCqExOp(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  if (!context || !attr) {
    return RejectNull(EINVAL, "ibv_create_cq_ex: %s is NULL", !context ? "context" : "cq_attr");
  }
  if (attr->comp_mask & ~kKnownCqComp) {
    Log("ibv_create_cq_ex: comp_mask 0x%x has unknown bits", attr->comp_mask);
    return FailNull<ibv_cq_ex>(EINVAL);
  }
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (attr->flags & ~kKnownCqFlags)) {
    Log("ibv_create_cq_ex: flags 0x%x are not supported", attr->flags);
    return FailNull<ibv_cq_ex>(EOPNOTSUPP);
  }
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && !IsParentDomain(attr->parent_domain)) {
    return RejectNull(EINVAL, "ibv_create_cq_ex: IBV_CQ_INIT_ATTR_MASK_PD needs a parent domain");
  }
  if (attr->wc_flags & ~kSupportedWcFlags) {
    Log("ibv_create_cq_ex: wc_flags 0x%llx ask for fields softverbs does not report",
        static_cast<unsigned long long>(attr->wc_flags & ~kSupportedWcFlags));
    return FailNull<ibv_cq_ex>(EOPNOTSUPP);
  }
  ibv_cq_ex* cq = CreateCq(context, attr->cqe, attr->cq_context, attr->channel, attr->comp_vector,
                           attr->wc_flags);
  if (cq && (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD)) {
    CqOf(cq)->parent_domain = attr->parent_domain;
    UseParentDomain(attr->parent_domain);
  }
  if (cq && (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS)) {
    CqOf(cq)->ignore_overrun = (attr->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) != 0;
  }
  return cq;
}

}  // namespace softverbs::provider

using namespace softverbs::provider;
using softverbs::Log;
namespace protocol = softverbs::protocol;

SV_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context,
                                ibv_comp_channel* channel, int comp_vector) {
  if (!context) return RejectNull(EINVAL, "ibv_create_cq: context is NULL");
  if (cqe < 1 || comp_vector < 0) {
    Log("ibv_create_cq: cqe %d / comp_vector %d out of range", cqe, comp_vector);
    return FailNull<ibv_cq>(EINVAL);
  }
  ibv_cq_ex* ex = CreateCq(context, static_cast<uint32_t>(cqe), cq_context, channel,
                           static_cast<uint32_t>(comp_vector), IBV_WC_STANDARD_FLAGS);
  return ex ? ibv_cq_ex_to_cq(ex) : nullptr;
}

namespace {

// A NIC writes a completion microseconds after the post; the device's
// network transport, a little later, from its own thread. So that a resize
// right after posting counts what those WRs owe this CQ, as it would on a
// NIC, it waits until every WR its QPs posted over the network has left the
// device (QpEntry::wire_retired, counted once the completion's slot is
// reserved: WireQp::CompleteFront) - a bounded wait: a WR held up by RNR or
// retry timers goes on after it.
void AwaitNetworkCompletions(Context* ctx, ibv_cq* cq) {
  constexpr uint64_t kPatienceNs = 100'000'000;
  const uint64_t deadline = softverbs::datapath::NowNs() + kPatienceNs;
  for (;;) {
    bool owed = false;
    {
      std::lock_guard objects(ctx->objects_mutex);
      std::lock_guard wire(ctx->wire_mutex);
      for (const Qp* qp : ctx->qps) {
        if (qp->ibv.qp_base.send_cq == cq && qp->entry &&
            qp->wire_posted != qp->entry->wire_retired.load(std::memory_order_acquire)) {
          owed = true;
          break;
        }
      }
    }
    if (!owed || softverbs::datapath::NowNs() > deadline) return;
    sched_yield();
  }
}

}  // namespace

// The ring is resized in place under the consumer lock (datapath/cq_ring.h):
// peers keep their mapping. Shrinking below the completions outstanding is
// EINVAL, as on hardware (with the network's owed ones counted:
// AwaitNetworkCompletions).
SV_EXPORT int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (!cq) return Reject(EINVAL, "ibv_resize_cq: cq is NULL");
  if (cqe < 1 || cqe > softverbs::limits::kMaxCqe) {
    return Reject(EINVAL, "ibv_resize_cq: cqe %d is outside 1..%d", cqe,
                  softverbs::limits::kMaxCqe);
  }
  // The size is rounded as at creation; the same size is nothing to do (mlx5).
  const int entries = softverbs::limits::RoundedCqe(cqe);
  if (entries == cq->cqe) return 0;
  Cq* c = FromPublic<Cq>(cq);
  Context* ctx = Context::From(cq->context);
  protocol::ResizeCqReply rep{};
  AwaitNetworkCompletions(ctx, cq);
  std::lock_guard lock(c->poll_lock);
  // Completions outstanding are counted against the size asked for, as
  // rxe's rxe_cq_chk_attr counts them.
  const auto commit = [&](uint64_t outstanding) {
    if (outstanding > static_cast<uint64_t>(cqe)) {
      Log("ibv_resize_cq: %llu completions outstanding, more than %d",
          static_cast<unsigned long long>(outstanding), cqe);
      return EINVAL;
    }
    protocol::ResizeCqRequest req{c->handle, static_cast<uint32_t>(cqe)};
    return ctx->channel.Call(protocol::Op::kResizeCq, req, &rep);
  };
  int err = c->ring.Resize(static_cast<uint32_t>(entries), c->ring_mapping.size(), commit);
  if (err) return err;
  cq->cqe = static_cast<int>(rep.cqe);
  return 0;
}

SV_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  if (!cq) return Reject(EINVAL, "ibv_destroy_cq: cq is NULL");
  Cq* c = FromPublic<Cq>(cq);
  Context* ctx = Context::From(cq->context);
  protocol::HandleRequest req{c->handle, 0};
  if (int err = ctx->channel.Call(protocol::Op::kDestroyCq, req)) {
    return err;
  }
  // Untracked and off its channel's list, no further event can be handed
  // out for the CQ (unread ones are dropped): wait until each one that was
  // has been acknowledged, completion events and async events alike
  // (event_lifetime.h).
  ctx->Untrack(c->handle);
  ForgetModeratedCq(ctx, c);
  ForgetDvQueue(ctx, DvQueueKind::kCq, c->cqn);  // mlx5 buffers of mlx5dv_init_obj, if any
  DropUnreadEventsOfDestroyedObjects(ctx);
  uint32_t comp_events_reported = 0;
  if (cq->channel) {
    auto* ch = FromPublic<CompChannel>(cq->channel);
    std::lock_guard lock(ch->mutex);
    std::erase(ch->cqs, c);
    comp_events_reported = c->events_delivered;
    __atomic_sub_fetch(&cq->channel->refcnt, 1, __ATOMIC_SEQ_CST);
  }
  WaitUnderMutex(&cq->mutex, &cq->cond, [&] {
    return cq->comp_events_completed == comp_events_reported &&
           cq->async_events_completed == c->async_events_reported;
  });
  UnuseParentDomain(c->parent_domain);
  pthread_cond_destroy(&cq->cond);
  pthread_mutex_destroy(&cq->mutex);
  delete c;
  return 0;
}

SV_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  if (!context) return RejectNull(EINVAL, "ibv_create_comp_channel: context is NULL");
  int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return RejectNull(errno, "ibv_create_comp_channel: eventfd: %s", strerror(errno));
  auto* ch = new CompChannel{};
  ch->ibv.context = context;
  ch->ibv.fd = fd;
  ch->ibv.refcnt = 0;
  return &ch->ibv;
}

SV_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (!channel) return Reject(EINVAL, "ibv_destroy_comp_channel: channel is NULL");
  if (__atomic_load_n(&channel->refcnt, __ATOMIC_SEQ_CST) > 0) {
    return Reject(EBUSY, "ibv_destroy_comp_channel: %d CQ(s) still use the channel",
                  channel->refcnt);
  }
  close(channel->fd);
  delete FromPublic<CompChannel>(channel);
  return 0;
}

SV_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (!channel || !cq || !cq_context) {
    return RejectMinusOne(EINVAL, "ibv_get_cq_event: %s is NULL",
                          !channel ? "channel"
                          : !cq    ? "cq"
                                   : "cq_context");
  }
  auto* ch = FromPublic<CompChannel>(channel);
  for (;;) {
    uint64_t one;
    if (read(channel->fd, &one, sizeof(one)) != sizeof(one)) return -1;
    // Each event was counted in its CQ's ring before the eventfd was written.
    std::lock_guard lock(ch->mutex);
    for (Cq* c : ch->cqs) {
      uint32_t raised = c->ring.header()->events_raised.load(std::memory_order_acquire);
      if (raised != c->events_delivered) {
        c->events_delivered++;
        *cq = ibv_cq_ex_to_cq(&c->ibv);
        *cq_context = (*cq)->cq_context;
        return 0;
      }
    }
    // The CQ was destroyed meanwhile: wait for the next event.
  }
}

SV_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (!cq) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_broadcast(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}
