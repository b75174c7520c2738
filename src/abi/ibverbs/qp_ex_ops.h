// The ibv_qp_ex work-request API (ibv_wr_start ... ibv_wr_complete) and the
// hooks the data path attaches to a QP.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace softverbs::provider {

struct Qp;

// The IBV_QP_EX_WITH_* operations a QP of this type can be created with.
uint64_t SupportedSendOpsFlags(ibv_qp_type type);

// Fills every wr_* pointer of a new QP.
void InstallQpExOps(ibv_qp_ex* qp);

// Called after a successful modify that set the QP's state: ERR flushes
// outstanding work, RESET empties the queues.
void OnQpStateChanged(Qp* qp, ibv_qp_state state);

}  // namespace softverbs::provider
