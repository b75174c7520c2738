#include "abi/ibverbs/send_queue.h"

#include <algorithm>

#include "abi/ibverbs/cq_moderation.h"
#include "abi/ibverbs/peers.h"
#include "abi/ibverbs/post_checks.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/wire_post.h"
#include "common/gid_table.h"
#include "datapath/timers.h"

namespace softverbs::provider {

namespace dp = softverbs::datapath;

namespace {

uint32_t MtuBytes(ibv_mtu mtu) {
  return 128u << static_cast<int>(mtu);
}

dp::LocalQp LocalView(Context* ctx, Qp* qp) {
  const ibv_qp& q = qp->ibv.qp_base;
  const dp::QpEntry* e = qp->entry;
  const auto load = [](const std::atomic<uint32_t>& v) {
    return v.load(std::memory_order_relaxed);
  };
  const ibv_mtu mtu =
      q.qp_type == IBV_QPT_UD ? ctx->active_mtu : static_cast<ibv_mtu>(RequesterOf(qp).path_mtu);
  return {q.qp_num,
          static_cast<uint32_t>(DatapathQpType(q.qp_type)),
          qp->pdn,
          e ? load(e->dest_qpn) : 0,
          e ? load(e->qkey) : 0,
          MtuBytes(mtu),
          static_cast<uint8_t>(e ? load(e->sl) : 0),
          &qp->peer_cache};
}

uint32_t SharedState(Qp* qp) {
  return qp->entry ? qp->entry->state.load(std::memory_order_acquire)
                   : static_cast<uint32_t>(qp->ibv.qp_base.state);
}

Cq* CqOf(ibv_cq* cq) {
  return cq ? FromPublic<Cq>(reinterpret_cast<ibv_cq_ex*>(cq)) : nullptr;
}

bool Signaled(Qp* qp, const dp::SendWr& wr) {
  return qp->sq_sig_all || (wr.send_flags & IBV_SEND_SIGNALED);
}

void Flushed(Qp* qp, const dp::SendWr& wr) {
  dp::Completion c{};
  c.wr_id = wr.wr_id;
  c.status = IBV_WC_WR_FLUSH_ERR;
  c.opcode = dp::WrOpcode(wr.opcode).send_wc;
  c.vendor_err = dp::kVendorFlushed;
  c.qp_num = qp->ibv.qp_base.qp_num;
  CompleteLocal(qp->ibv.qp_base.send_cq, c);
}

// Whether the send queue refuses to run WRs: ERR, or SQE (which only an
// unreliable QP enters).
bool SendQueueInError(uint32_t state) {
  return state == IBV_QPS_ERR || state == IBV_QPS_SQE;
}

void FlushWaiting(Context* ctx, Qp* qp) {
  for (const dp::SendWr& wr : qp->waiting) Flushed(qp, wr);
  ctx->waiting_count.fetch_sub(qp->waiting.size(), std::memory_order_relaxed);
  qp->waiting.clear();
}

// The requester saw an error. An unreliable QP (UD, UC) moves to SQE (IBA
// 10.3.1): its send queue is flushed, its receive queue keeps working and
// ibv_modify_qp SQE->RTS resumes sending. A reliable one moves to ERR and
// both queues are flushed. Either state is published by the daemon.
// Called with sq_mutex held.
void EnterError(Context* ctx, Qp* qp) {
  // A drain in progress ends here: the QP left SQD without draining.
  qp->sqd_notify_pending = false;
  const ibv_qp_type type = DatapathQpType(qp->ibv.qp_base.qp_type);
  if (type == IBV_QPT_UD || type == IBV_QPT_UC) {
    ctx->peers->SetSendQueueError(qp->ibv.qp_base.qp_num);
    FlushWaiting(ctx, qp);
    return;
  }
  ctx->peers->SetQpError(qp->ibv.qp_base.qp_num);
  FlushWaiting(ctx, qp);
  if (qp->rq.valid()) {
    Cq* rcq = CqOf(qp->ibv.qp_base.recv_cq);
    if (rcq) dp::FlushRecvQueue(qp->rq, rcq->ring, rcq->event_fd, qp->ibv.qp_base.qp_num);
  }
}

enum class Step { kFinished, kWait };

// Runs one WR and handles its outcome. Called with sq_mutex held.
Step RunOne(Context* ctx, Qp* qp, dp::SendWr& wr) {
  dp::Outcome out = dp::Execute(*ctx->peers, LocalView(ctx, qp), wr);
  dp::Completion& c = out.completion;
  // The clock is read only on the slow paths: on the 8-byte write rate it
  // was a tenth of the cost of a post.
  switch (out.result) {
    case dp::ExecResult::kRnr: {
      const uint64_t now = dp::NowNs();
      const dp::RequesterAttributes r = RequesterOf(qp);
      if (r.rnr_retry != 7 && wr.rnr_retries >= r.rnr_retry) {
        c.status = IBV_WC_RNR_RETRY_EXC_ERR;
        c.vendor_err = dp::kVendorRnrExceeded;
        break;
      }
      wr.rnr_retries++;
      wr.first_attempt_ns = 0;  // the responder answered: the ACK timer restarts
      wr.next_attempt_ns = now + dp::RnrTimerNs(static_cast<uint32_t>(out.rnr_timer_ns));
      return Step::kWait;
    }
    case dp::ExecResult::kNoResponse: {
      const uint64_t now = dp::NowNs();
      if (wr.first_attempt_ns == 0) wr.first_attempt_ns = now;
      const dp::RequesterAttributes r = RequesterOf(qp);
      const uint64_t timeout = dp::AckTimeoutNs(r.timeout);
      const uint64_t budget = timeout == UINT64_MAX ? UINT64_MAX : timeout * (r.retry_cnt + 1ull);
      if (budget != UINT64_MAX && now - wr.first_attempt_ns >= budget) {
        c.status = IBV_WC_RETRY_EXC_ERR;
        c.vendor_err = dp::kVendorNoResponse;
        break;
      }
      // Look again soon: a target that becomes ready is served at once.
      wr.next_attempt_ns = now + std::min<uint64_t>(timeout, 200000);
      return Step::kWait;
    }
    case dp::ExecResult::kDone:
      break;
  }
  if (c.status != IBV_WC_SUCCESS || Signaled(qp, wr)) CompleteLocal(qp->ibv.qp_base.send_cq, c);
  // A rendezvous to a tag-matching SRQ: its FIN comes after our completion.
  if (out.rendezvous.pending) dp::FinishRendezvous(*ctx->peers, LocalView(ctx, qp), out.rendezvous);
  if (c.status != IBV_WC_SUCCESS) EnterError(ctx, qp);
  return Step::kFinished;
}

// Whether every WR started before SQD is done: what is left, if anything,
// was posted in SQD and is held. Held WRs only ever sit behind the others
// (they are queued at the back, and un-held all at once on SQD->RTS), so
// the front says it. Called with sq_mutex held.
bool Drained(const Qp* qp) {
  return qp->waiting.empty() || qp->waiting.front().held;
}

// The send queue is drained: a drain that asked to be told about it is
// over. Called with sq_mutex held.
void NoteSendQueueDrained(Context* ctx, Qp* qp) {
  if (!qp->sqd_notify_pending) return;
  qp->sqd_notify_pending = false;
  ctx->peers->RaiseQpEvent(qp->ibv.qp_base.qp_num, IBV_EVENT_SQ_DRAINED);
}

void ProgressQp(Context* ctx, Qp* qp) {
  std::lock_guard lock(qp->sq_mutex);
  if (SendQueueInError(SharedState(qp))) {
    FlushWaiting(ctx, qp);
    return;
  }
  const bool sqd = SharedState(qp) == IBV_QPS_SQD;
  const uint64_t now = dp::NowNs();
  while (!qp->waiting.empty()) {
    dp::SendWr& wr = qp->waiting.front();
    if (wr.held) {
      // Posted in SQD: it starts once the QP is back in RTS (ResumeSends
      // un-holds on the modify; this covers a state changed elsewhere).
      if (sqd) return;
      wr.held = false;
    }
    if (wr.next_attempt_ns > now) return;
    if (RunOne(ctx, qp, wr) == Step::kWait) return;
    if (qp->waiting.empty()) return;  // EnterError flushed them all
    qp->waiting.pop_front();
    ctx->waiting_count.fetch_sub(1, std::memory_order_relaxed);
    if (Drained(qp)) NoteSendQueueDrained(ctx, qp);
  }
}

// Retries every waiting QP. Called with waiting_mutex held, which also keeps
// ibv_destroy_qp from freeing a QP under it.
void ProgressWaitingLocked(Context* ctx) {
  for (Qp* qp : ctx->waiting_qps) ProgressQp(ctx, qp);
  std::erase_if(ctx->waiting_qps, [](Qp* qp) {
    std::lock_guard sq(qp->sq_mutex);
    return qp->waiting.empty();
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
    std::lock_guard lock(qp->sq_mutex);
    // IBA 10.3.1: a WR posted in ERR or SQE completes with WR_FLUSH_ERR.
    const uint32_t state = SharedState(qp);
    if (SendQueueInError(state)) {
      Flushed(qp, wr);
      return 0;
    }
    // Over the network: the device's transport runs it (wire_post.h).
    if (GoesOverWire(qp, wr)) return PostToWire(ctx, qp, wr);
    // IBA 10.3.1: in SQD the post is accepted but the WR does not start
    // until SQD->RTS; it queues behind the WRs that are still draining.
    const bool hold = state == IBV_QPS_SQD;
    if (!qp->waiting.empty() || hold) {
      if (qp->waiting.size() >= qp->cap.max_send_wr) {
        return Reject(
            ENOMEM, "ibv_post_send: WR 0x%llx: QP 0x%x's send queue is full (max_send_wr %u)",
            static_cast<unsigned long long>(wr.wr_id), qp->ibv.qp_base.qp_num, qp->cap.max_send_wr);
      }
      qp->waiting.push_back(wr);
      // On the queue's copy: the caller may reuse its SendWr.
      qp->waiting.back().held = hold;
      ctx->waiting_count.fetch_add(1, std::memory_order_relaxed);
      wait = true;
    } else {
      // Run the caller's WR in place (it is ~1 KiB): RunOne only updates
      // retry bookkeeping in it, and it is copied only if it must wait.
      if (RunOne(ctx, qp, wr) == Step::kWait) {
        qp->waiting.push_back(wr);
        ctx->waiting_count.fetch_add(1, std::memory_order_relaxed);
        wait = true;
      }
    }
  }
  if (wait) NoteWaiting(ctx, qp);
  return 0;
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
    std::lock_guard lock(qp->sq_mutex);
    FlushWaiting(ctx, qp);
  }
  if (qp->rq.valid()) {
    Cq* rcq = CqOf(qp->ibv.qp_base.recv_cq);
    if (rcq) dp::FlushRecvQueue(qp->rq, rcq->ring, rcq->event_fd, qp->ibv.qp_base.qp_num);
  }
}

void EmptyQp(Qp* qp) {
  Context* ctx = Context::From(qp->ibv.qp_base.context);
  {
    std::lock_guard lock(qp->sq_mutex);
    ctx->waiting_count.fetch_sub(qp->waiting.size(), std::memory_order_relaxed);
    qp->waiting.clear();
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
  std::lock_guard lock(qp->sq_mutex);
  // The WRs still waiting (RNR, no response) keep running in SQD; the last
  // of them to complete raises the event (ProgressQp). WRs that completed
  // since the daemon published SQD are already gone from `waiting`.
  // WRs posted since (held) do not count: they have not started.
  qp->sqd_notify_pending = true;
  if (Drained(qp)) NoteSendQueueDrained(ctx, qp);
}

void ResumeSends(Qp* qp) {
  Context* ctx = Context::From(qp->ibv.qp_base.context);
  {
    std::lock_guard lock(qp->sq_mutex);
    if (qp->waiting.empty()) return;
    // All at once, so that a later RTS->SQD drains them like any WR
    // started in RTS, even if progress has not reached them yet.
    for (dp::SendWr& wr : qp->waiting) wr.held = false;
  }
  // Start them now, in the caller's thread as a post would: the
  // application need not post or poll again before they are on the wire
  // (an RNR among them waits for the helper thread and ibv_poll_cq).
  ProgressQp(ctx, qp);
  bool waiting;
  {
    std::lock_guard lock(qp->sq_mutex);
    waiting = !qp->waiting.empty();
  }
  if (waiting) NoteWaiting(ctx, qp);
}

void CancelDrainNotify(Qp* qp) {
  std::lock_guard lock(qp->sq_mutex);
  qp->sqd_notify_pending = false;
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
    std::lock_guard lock(c->poll_mutex);
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
