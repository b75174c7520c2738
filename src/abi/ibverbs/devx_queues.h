// The DEVX queue engine of a context: what a ConnectX does for the CQs and
// QPs a program created through DEVX (docs/devx.md, "Data path"). One
// thread per context, started by the first DEVX queue, that
//   - reads the receive counter of each QP's doorbell record and copies new
//     mlx5 receive WQEs into the QP's shadow receive queue, where senders
//     (verbs QPs, or other DEVX engines) claim them; and so for the linked
//     list of a verbs SRQ given mlx5 buffers (mlx5dv_init_obj);
//   - reads the send counter and executes new send WQEs through the same
//     work-request engine as ibv_post_send (datapath::Execute), with the
//     QP's RNR and ACK-timeout retries, error completions and flushes;
//   - turns the completions that reach each CQ's shadow ring into mlx5 CQEs
//     in the CQ buffer (owner bit last), up to the consumer index in the
//     CQ's doorbell record.
// It spins while it finds work and backs off to sleeping (at most 1 ms)
// when there is none; with no DEVX queue there is no thread at all.
#pragma once

#include "abi/ibverbs/provider.h"

namespace softverbs::provider {

// Stops the context's engine (ibv_close_device). In a forked child, whose
// copy of the context has no engine thread, it only forgets the engine.
void StopDevxQueues(Context* ctx);

// A verbs QP, CQ or SRQ is being destroyed: if mlx5dv_init_obj gave it
// mlx5 buffers, the engine stops serving them and frees them.
enum class DvQueueKind { kQp, kCq, kSrq };
void ForgetDvQueue(Context* ctx, DvQueueKind kind, uint32_t number);

}  // namespace softverbs::provider
