// A QP's send queue: work requests run at once in the caller's thread; one
// that cannot complete yet (the responder had no receive WQE, or did not
// answer) waits, with everything posted after it, and is retried by
// Progress() - called from ibv_poll_cq, ibv_post_send and the context's
// helper thread - until it completes or exhausts rnr_retry / retry_cnt.
#pragma once

#include "abi/ibverbs/provider.h"

namespace softverbs::provider {

// Executes (or queues) one WR. Returns 0, or ENOMEM when max_send_wr WRs
// are already waiting. wr's retry fields may be updated (it runs in place).
int SubmitSend(Context* ctx, Qp* qp, datapath::SendWr& wr);

// Runs an application's RDMA WRITE, SEND or SEND_WITH_IMM on the plain
// path (datapath/shm_plain_post.h) when its shape and the QP allow: RC or
// UC, one SGE of a non-zero length (inline within max_inline_data, or
// keyed), known flags, the QP in RTS on this host with nothing waiting, no
// engine trace. True: the WR ran and completed (its completion written if
// signaled); false: nothing happened, post it as any other WR.
bool PostPlain(Context* ctx, Qp* qp, const ibv_send_wr& wr);

// Retries the waiting WRs of every QP of the context that has some.
void ProgressContext(Context* ctx);

// The QP entered the error state: completes every waiting WR and every
// posted receive with IBV_WC_WR_FLUSH_ERR.
void FlushQp(Qp* qp);
// The QP went to RESET: forgets waiting WRs and posted receives, and
// removes its completions from its CQs (CleanQpCompletions).
void EmptyQp(Qp* qp);
// Removes the QP's outstanding completions from its send and receive CQs,
// as libmlx5 does on RESET and destroy (mlx5_cq_clean). Receive
// completions of a QP on an SRQ stay (see docs/datapath.md).
void CleanQpCompletions(Qp* qp);

// The QP went RTS->SQD with en_sqd_async_notify: raises
// IBV_EVENT_SQ_DRAINED now if no WR started before SQD is waiting, else
// when the last of them completes (WRs posted in SQD are held and do not
// count; not at all if it fails or the QP leaves SQD first).
void StartDrainNotify(Qp* qp);
// The QP is in RTS again (SQD->RTS): WRs posted in SQD are no longer held
// and start now, in order, behind any still waiting.
void ResumeSends(Qp* qp);
// The QP changed state: a pending SQ_DRAINED is no longer due.
void CancelDrainNotify(Qp* qp);

// Before a QP is freed: no retry may run on it any more.
void ForgetQp(Context* ctx, Qp* qp);

// Starts the context's helper thread if it is not running (holding
// waiting_mutex): when a WR first waits, or a CQ is first moderated.
void StartProgressThreadLocked(Context* ctx);
// Stops the context's helper thread.
void StopProgressThread(Context* ctx);

// Writes a completion to a local CQ.
void CompleteLocal(ibv_cq* cq, const datapath::Completion& c);

}  // namespace softverbs::provider
