// The one registration path: ibv_reg_mr, ibv_reg_mr_iova(2) and the device
// memory MRs of ibv_reg_dm_mr all end here.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "protocol/messages.h"

namespace softverbs::provider {

// Registers [addr, addr+length), addressed by the keys from `iova` on. NULL
// with errno on failure (every rule explained on the log channel).
ibv_mr* RegisterMr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access);

// The tail every registration shares: the device's reply becomes the MR the
// application sees (addr/length as given). Undoes the registration and
// releases the backing when it cannot.
ibv_mr* MakeMr(ibv_pd* pd, const protocol::RegMrReply& rep, uint64_t backing_id, unsigned access,
               void* addr, size_t length);

struct Context;

// Tells ctx's device of the memfds it kept for ctx and the registry of
// converted ranges has dropped since (ForgottenBackings, in batches):
// called by ctx's registrations and deregistrations, after the registry's
// work.
void SendForgottenBackings(Context* ctx);

}  // namespace softverbs::provider
