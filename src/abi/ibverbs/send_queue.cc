#include "abi/ibverbs/send_queue.h"

#include <algorithm>

#include "abi/ibverbs/cq_moderation.h"
#include "abi/ibverbs/peers.h"
#include "abi/ibverbs/post_checks.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/wire_post.h"
#include "common/gid_table.h"
#include "common/raw_enum.h"
#include "datapath/shm_plain_post.h"
#include "datapath/shm_send_queue.h"

namespace softverbs::provider {

namespace dp = softverbs::datapath;

namespace {

uint32_t MtuBytes(ibv_mtu mtu) {
  return 128u << static_cast<int>(mtu);
}

dp::LocalQp LocalView(Context* ctx, Qp* qp, const dp::RequesterAttributes& requester) {
  const ibv_qp& q = qp->ibv.qp_base;
  const dp::QpEntry* e = qp->entry;
  const auto load = [](const std::atomic<uint32_t>& v) {
    return v.load(std::memory_order_relaxed);
  };
  const ibv_mtu mtu =
      q.qp_type == IBV_QPT_UD ? ctx->active_mtu : static_cast<ibv_mtu>(requester.path_mtu);
  return {q.qp_num,
          static_cast<uint32_t>(qp->type),
          qp->pdn,
          e ? load(e->dest_qpn) : 0,
          e ? load(e->qkey) : 0,
          MtuBytes(mtu),
          static_cast<uint8_t>(e ? load(e->sl) : 0),
          &qp->peer_cache};
}

dp::LocalQp LocalView(Context* ctx, Qp* qp) {
  return LocalView(ctx, qp, RequesterOf(qp));
}

uint32_t SharedState(Qp* qp) {
  return qp->entry ? qp->entry->state.load(std::memory_order_acquire)
                   : static_cast<uint32_t>(qp->ibv.qp_base.state);
}

Cq* CqOf(ibv_cq* cq) {
  return cq ? FromPublic<Cq>(reinterpret_cast<ibv_cq_ex*>(cq)) : nullptr;
}

// Whether the send queue refuses to run WRs: ERR, or SQE (which only an
// unreliable QP enters).
bool SendQueueInError(uint32_t state) {
  return state == IBV_QPS_ERR || state == IBV_QPS_SQE;
}

// The QP as its send queue (datapath/shm_send_queue.h) reaches it: the
// device's tables through the context's peer cache, the QP's CQs, and the
// daemon for state changes and events.
class QpPort {
 public:
  QpPort(Context* ctx, Qp* qp) : ctx_(ctx), qp_(qp) {}
  dp::Host& host() { return *ctx_->peers; }
  uint32_t qpn() const { return qp_->ibv.qp_base.qp_num; }
  dp::LocalQp View() { return LocalView(ctx_, qp_); }
  dp::RequesterAttributes Requester() { return RequesterOf(qp_); }
  bool SignalsAll() const { return qp_->sq_sig_all; }
  void CompleteSend(const dp::Completion& c) { CompleteLocal(qp_->ibv.qp_base.send_cq, c); }
  void SetError() {
    if (Unreliable()) {
      ctx_->peers->SetSendQueueError(qpn());
    } else {
      ctx_->peers->SetQpError(qpn());
    }
  }
  void FlushReceivesAfterError() {
    if (Unreliable() || !qp_->rq.valid()) return;
    Cq* rcq = CqOf(qp_->ibv.qp_base.recv_cq);
    if (rcq) dp::FlushRecvQueue(qp_->rq, rcq->ring, rcq->event_fd, qpn());
  }
  void SendQueueDrained() { ctx_->peers->RaiseQpEvent(qpn(), IBV_EVENT_SQ_DRAINED); }
  void DrainOnSigError() {
    ctx_->peers->DrainSendQueue(qpn());
    ctx_->peers->RaiseQpEvent(qpn(), IBV_EVENT_SQ_DRAINED);
  }

 private:
  // IBA 10.3.1: UD and UC QPs move to SQE on a requester error.
  bool Unreliable() const {
    const ibv_qp_type type = qp_->type;
    return type == IBV_QPT_UD || type == IBV_QPT_UC;
  }
  Context* ctx_;
  Qp* qp_;
};

static_assert(dp::ShmQpPort<QpPort>);

// Runs f on qp's send queue (sq_lock held) and keeps the context's count
// of waiting WRs, which spares ibv_poll_cq a lock when nothing waits.
template <typename F>
void WithSendQueue(Context* ctx, Qp* qp, F f) {
  const size_t before = qp->sq.size();
  f();
  const size_t after = qp->sq.size();
  if (after > before) ctx->waiting_count.fetch_add(after - before, std::memory_order_relaxed);
  if (after < before) ctx->waiting_count.fetch_sub(before - after, std::memory_order_relaxed);
}

void ProgressQp(Context* ctx, Qp* qp) {
  std::lock_guard lock(qp->sq_lock);
  QpPort port(ctx, qp);
  WithSendQueue(ctx, qp, [&] {
    const uint32_t state = SharedState(qp);
    if (SendQueueInError(state)) return qp->sq.Flush(port);
    qp->sq.Progress(port, state == IBV_QPS_SQD);
  });
}

// Retries every waiting QP. Called with waiting_mutex held, which also keeps
// ibv_destroy_qp from freeing a QP under it.
void ProgressWaitingLocked(Context* ctx) {
  for (Qp* qp : ctx->waiting_qps) ProgressQp(ctx, qp);
  std::erase_if(ctx->waiting_qps, [](Qp* qp) {
    std::lock_guard sq(qp->sq_lock);
    return qp->sq.empty();
  });
}

// The helper thread: retries waiting send queues and fires the completion
// events of moderated CQs whose period ran out (cq_moderation.h).
void ProgressLoop(Context* ctx) {
  std::unique_lock lock(ctx->waiting_mutex);
  while (!ctx->stopping) {
    if (!ctx->waiting_qps.empty()) ProgressWaitingLocked(ctx);
    const int64_t moderation_ns = FireDueModerationLocked(ctx);
    if (ctx->waiting_qps.empty() && moderation_ns < 0) {
      ctx->waiting_cv.wait(lock);
      continue;
    }
    // Short naps: RNR timers are as short as 10 us.
    int64_t nap_ns = ctx->waiting_qps.empty() ? moderation_ns : 50'000;
    if (moderation_ns >= 0) nap_ns = std::min(nap_ns, moderation_ns);
    ctx->waiting_cv.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(nap_ns, 10'000)));
  }
}

void NoteWaiting(Context* ctx, Qp* qp) {
  std::lock_guard lock(ctx->waiting_mutex);
  if (std::find(ctx->waiting_qps.begin(), ctx->waiting_qps.end(), qp) == ctx->waiting_qps.end()) {
    ctx->waiting_qps.push_back(qp);
  }
  StartProgressThreadLocked(ctx);
  ctx->waiting_cv.notify_one();
}

}  // namespace

void StartProgressThreadLocked(Context* ctx) {
  if (!ctx->progress_thread.joinable()) {
    ctx->progress_thread = std::thread(ProgressLoop, ctx);
  }
}

void CompleteLocal(ibv_cq* cq, const dp::Completion& c) {
  Cq* q = CqOf(cq);
  if (q) dp::Complete(q->ring, q->event_fd, c);
}

int SubmitSend(Context* ctx, Qp* qp, dp::SendWr& wr) {
  bool wait = false;
  {
    std::lock_guard lock(qp->sq_lock);
    // IBA 10.3.1: a WR posted in ERR or SQE completes with WR_FLUSH_ERR.
    const uint32_t state = SharedState(qp);
    if (SendQueueInError(state)) {
      CompleteLocal(qp->ibv.qp_base.send_cq, dp::FlushedCompletion(wr, qp->ibv.qp_base.qp_num));
      return 0;
    }
    // Over the network: the device's transport runs it (wire_post.h).
    if (GoesOverWire(qp, wr)) {
      wr.sig_pipelining = qp->sq.SigPipelining();
      return PostToWire(ctx, qp, wr);
    }
    // IBA 10.3.1: in SQD the post is accepted but the WR does not start
    // until SQD->RTS; it queues behind the WRs that are still draining.
    QpPort port(ctx, qp);
    if (qp->sq.empty() && state != IBV_QPS_SQD) [[likely]] {
      // Nothing waits: the WR runs now; only one that must wait is counted.
      (void)qp->sq.Post(port, wr, false, qp->cap.max_send_wr);
      if (qp->sq.empty()) return 0;
      ctx->waiting_count.fetch_add(qp->sq.size(), std::memory_order_relaxed);
    } else {
      int err = 0;
      WithSendQueue(
          ctx, qp, [&] { err = qp->sq.Post(port, wr, state == IBV_QPS_SQD, qp->cap.max_send_wr); });
      if (err) {
        return Reject(
            err, "ibv_post_send: WR 0x%llx: QP 0x%x's send queue is full (max_send_wr %u)",
            static_cast<unsigned long long>(wr.wr_id), qp->ibv.qp_base.qp_num, qp->cap.max_send_wr);
      }
    }
    wait = !qp->sq.empty();
  }
  if (wait) NoteWaiting(ctx, qp);
  return 0;
}

namespace {

// The completion of a WR the plain path ran, if signaled. Under the send
// queue's lock, as the send queue writes every completion: another
// thread's WR on this QP cannot complete in between.
void CompletePlain(Qp* qp, const ibv_send_wr& wr, const dp::WrOpcodeInfo& info) {
  if (!qp->sq_sig_all && !(wr.send_flags & IBV_SEND_SIGNALED)) return;
  const ibv_qp& q = qp->ibv.qp_base;
  dp::Completion c{};
  c.wr_id = wr.wr_id;
  c.status = IBV_WC_SUCCESS;
  c.opcode = info.send_wc;
  c.qp_num = q.qp_num;
  c.byte_len = info.action == dp::WrAction::kAtomic ? 8 : wr.sg_list[0].length;
  CompleteLocal(q.send_cq, c);
}

// Runs wr on the QP's route (datapath/plain_route.h) if wr is a WRITE,
// READ or SEND of the route's opcode, inline flag and keys. Called by
// PostPlain under the send queue's lock, for a WR of one SGE of non-zero
// length with known flags on a QP in RTS with nothing waiting and its path
// on this host; what PostPlain checks of wr besides is fixed for the QP
// (its type, max_send_sge) or checked here (max_inline_data).
bool PostRouted(Context* ctx, Qp* qp, const ibv_send_wr& wr) {
  const dp::PlainRoute& route = qp->route;
  const ibv_sge& sge = wr.sg_list[0];
  const bool inline_src = wr.send_flags & IBV_SEND_INLINE;
  const dp::WrOpcodeInfo& info = dp::WrOpcode(route.opcode);
  const bool keyed = info.headers & dp::kHeaderReth;  // a WRITE or READ: the rkey too
  if (RawEnum(wr.opcode) != route.opcode || inline_src != route.inline_src ||
      (inline_src ? sge.length > qp->cap.max_inline_data || sge.length > dp::kMaxInline
                  : sge.lkey != route.local.key) ||
      (keyed && wr.wr.rdma.rkey != route.remote.key)) {
    return false;
  }
  const dp::QpEntry* e = qp->entry;
  if (!e) return false;
  const ibv_qp& q = qp->ibv.qp_base;
  const dp::RoutedWr routed{e->dest_qpn.load(std::memory_order_relaxed),
                            q.qp_num,
                            static_cast<uint8_t>(e->sl.load(std::memory_order_relaxed)),
                            wr.send_flags,
                            wr.imm_data,
                            sge.addr,
                            sge.lkey,
                            sge.length,
                            keyed ? wr.wr.rdma.remote_addr : 0,
                            keyed ? wr.wr.rdma.rkey : 0};
  if (!dp::TryRoutedPost(*ctx->peers, route, routed)) return false;
  CompletePlain(qp, wr, info);
  return true;
}

}  // namespace

bool PostPlain(Context* ctx, Qp* qp, const ibv_send_wr& wr) {
  const uint32_t opcode = RawEnum(wr.opcode);
  if (!dp::HasPlainPath(opcode) || wr.num_sge != 1 || (wr.send_flags & ~kKnownSendFlags) ||
      wr.sg_list[0].length == 0 || dp::EngineTraceOn()) {
    return false;
  }
  // A fence may stop a send queue with signature pipelining: its queue decides.
  if ((wr.send_flags & IBV_SEND_FENCE) && qp->sq.SigPipelining()) return false;
  // One lock for both ways: the route is kept under it.
  std::lock_guard lock(qp->sq_lock);
  // The packed word now, unpacked past the route (which needs one bit).
  const uint32_t requester_word =
      qp->entry ? qp->entry->requester.load(std::memory_order_acquire) : 0;
  if (SharedState(qp) != IBV_QPS_RTS || !qp->sq.empty() ||
      dp::UnpackRequester(requester_word).path_leaves_host) {
    return false;
  }
  if (qp->route.valid && PostRouted(ctx, qp, wr)) return true;
  const dp::RequesterAttributes requester = dp::UnpackRequester(requester_word);
  const ibv_qp& q = qp->ibv.qp_base;
  if (q.qp_type != IBV_QPT_RC && q.qp_type != IBV_QPT_UC) return false;
  const ibv_sge& sge = wr.sg_list[0];
  const bool inline_src = wr.send_flags & IBV_SEND_INLINE;
  const dp::WrOpcodeInfo& info = dp::WrOpcode(opcode);
  // What ConvertSendWr and CheckSendWr would refuse stays theirs to refuse:
  // an opcode the QP's type does not have (a READ or an atomic on UC),
  // inline bytes above max_inline_data or on a READ or an atomic, an SGE on
  // a QP made with max_send_sge 0.
  if (!dp::WrOpcodeAllowed(info, q.qp_type) ||
      (inline_src && (!info.inline_allowed || sge.length > qp->cap.max_inline_data ||
                      sge.length > dp::kMaxInline)) ||
      (!inline_src && qp->cap.max_send_sge < 1)) {
    return false;
  }
  dp::PlainPost p{
      opcode, wr.send_flags, wr.imm_data, sge.addr, sge.lkey, inline_src, sge.length, 0, 0, 0, 0};
  // The remote side is in the union member the opcode's headers name.
  if (info.headers & dp::kHeaderReth) {
    p.remote_addr = wr.wr.rdma.remote_addr;
    p.rkey = wr.wr.rdma.rkey;
  } else if (info.headers & dp::kHeaderAtomicEth) {
    p.remote_addr = wr.wr.atomic.remote_addr;
    p.rkey = wr.wr.atomic.rkey;
    p.compare_add = wr.wr.atomic.compare_add;
    p.swap = wr.wr.atomic.swap;
  }
  if (!dp::TryPlainPost(*ctx->peers, LocalView(ctx, qp, requester), p, &qp->route)) {
    return false;
  }
  CompletePlain(qp, wr, info);
  return true;
}

void ProgressContext(Context* ctx) {
  if (ctx->waiting_count.load(std::memory_order_relaxed) == 0) return;
  std::unique_lock lock(ctx->waiting_mutex, std::try_to_lock);
  if (lock.owns_lock()) ProgressWaitingLocked(ctx);  // else the helper thread is at it
}

void ForgetQp(Context* ctx, Qp* qp) {
  std::lock_guard lock(ctx->waiting_mutex);
  std::erase(ctx->waiting_qps, qp);
}

void FlushQp(Qp* qp) {
  Context* ctx = Context::From(qp->ibv.qp_base.context);
  {
    std::lock_guard lock(qp->sq_lock);
    QpPort port(ctx, qp);
    WithSendQueue(ctx, qp, [&] { qp->sq.Flush(port); });
  }
  if (qp->rq.valid()) {
    Cq* rcq = CqOf(qp->ibv.qp_base.recv_cq);
    if (rcq) dp::FlushRecvQueue(qp->rq, rcq->ring, rcq->event_fd, qp->ibv.qp_base.qp_num);
  }
}

void EmptyQp(Qp* qp) {
  Context* ctx = Context::From(qp->ibv.qp_base.context);
  {
    std::lock_guard lock(qp->sq_lock);
    WithSendQueue(ctx, qp, [&] { qp->sq.Clear(); });
  }
  dp::ClaimedRecv r;
  while (qp->rq.valid() && qp->rq.Claim(&r)) {
  }
  // After the queues: the RESET is published and the receive WQEs are
  // gone, so no new completion of this QP is on its way (bar a delivery
  // that claimed its WQE just before; docs/datapath.md).
  CleanQpCompletions(qp);
}

void StartDrainNotify(Qp* qp) {
  Context* ctx = Context::From(qp->ibv.qp_base.context);
  std::lock_guard lock(qp->sq_lock);
  // WRs that completed since the daemon published SQD are already gone
  // from the queue.
  QpPort port(ctx, qp);
  qp->sq.StartDrainNotify(port);
}

void ResumeSends(Qp* qp) {
  Context* ctx = Context::From(qp->ibv.qp_base.context);
  {
    std::lock_guard lock(qp->sq_lock);
    if (qp->sq.empty()) return;
    qp->sq.Unhold();
  }
  // Start them now, in the caller's thread as a post would: the
  // application need not post or poll again before they are on the wire
  // (an RNR among them waits for the helper thread and ibv_poll_cq).
  ProgressQp(ctx, qp);
  bool waiting;
  {
    std::lock_guard lock(qp->sq_lock);
    waiting = !qp->sq.empty();
  }
  if (waiting) NoteWaiting(ctx, qp);
}

void CancelDrainNotify(Qp* qp) {
  std::lock_guard lock(qp->sq_lock);
  qp->sq.CancelDrainNotify();
}

void CleanQpCompletions(Qp* qp) {
  const ibv_qp& q = qp->ibv.qp_base;
  const uint32_t qpn = q.qp_num;
  // A receive on an SRQ consumed one of the SRQ's WQEs. mlx5 hands the WQE
  // back to the SRQ when it drops the CQE; here the WQE is gone once
  // claimed, so dropping the completion would lose the application's
  // buffer: it stays.
  const bool keep_receives = q.srq != nullptr;
  auto drop = [&](const dp::Completion& c) {
    return c.qp_num == qpn && !(keep_receives && (c.opcode & IBV_WC_RECV));
  };
  auto clean = [&](ibv_cq* cq) {
    Cq* c = CqOf(cq);
    if (!c) return;
    std::lock_guard lock(c->poll_lock);
    c->ring.Clean(drop);
  };
  clean(q.send_cq);
  if (q.recv_cq != q.send_cq) clean(q.recv_cq);
}

void StopProgressThread(Context* ctx) {
  {
    std::lock_guard lock(ctx->waiting_mutex);
    ctx->stopping = true;
    ctx->waiting_cv.notify_all();
  }
  if (ctx->progress_thread.joinable()) ctx->progress_thread.join();
}

}  // namespace softverbs::provider
