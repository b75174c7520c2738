// Completion-event moderation (cq_moderation.cc): ibv_modify_cq and the
// owner-side timer that fires a moderated CQ's event when cq_period ran out.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace softverbs::provider {

struct Context;
struct Cq;

int ModifyCqOp(ibv_cq* cq, ibv_modify_cq_attr* attr);
// ibv_req_notify_cq armed cq: wakes the timer if cq is moderated.
void NoteModeratedArm(Cq* cq);
// The helper thread, holding waiting_mutex: raises the events that are due;
// returns nanoseconds until it must look again, or -1 (no moderated CQ armed).
int64_t FireDueModerationLocked(Context* ctx);
// Before a CQ is freed.
void ForgetModeratedCq(Context* ctx, Cq* cq);

}  // namespace softverbs::provider
