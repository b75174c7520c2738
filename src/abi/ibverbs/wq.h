// Receive work queues (ibv_create_wq) and their indirection tables
// (ibv_create_rwq_ind_table), what an RSS QP spreads frames over
// (docs/raw_packet.md). A work queue is a raw packet QP of the library's own
// that only receives: its receive ring, its CQ and its QP number (the WQ's
// wq_num) are the QP's, and the device delivers to it as to any raw packet
// QP. Its states map onto the QP's: RESET is INIT (receives may be posted,
// nothing arrives), RDY is RTR, ERR is ERR.
#pragma once

#include <infiniband/verbs.h>

#include "abi/ibverbs/provider.h"

namespace softverbs::provider {

struct Wq {
  ibv_wq ibv;  // first
  ibv_qp* qp;  // the raw packet QP that holds the queue
};

struct RwqIndTable {
  ibv_rwq_ind_table ibv;  // first
  Handle handle;
};

// wq.cc: the verbs_context operations.
ibv_wq* CreateWqOp(ibv_context* context, ibv_wq_init_attr* attr);
int ModifyWqOp(ibv_wq* wq, ibv_wq_attr* attr);
int DestroyWqOp(ibv_wq* wq);
ibv_rwq_ind_table* CreateRwqIndTableOp(ibv_context* context, ibv_rwq_ind_table_init_attr* attr);
int DestroyRwqIndTableOp(ibv_rwq_ind_table* table);

}  // namespace softverbs::provider
