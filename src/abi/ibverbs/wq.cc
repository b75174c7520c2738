// Receive work queues and indirection tables (wq.h, docs/raw_packet.md).
#include "abi/ibverbs/wq.h"

#include <errno.h>
#include <string.h>

#include <new>

#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/reject.h"
#include "common/device_limits.h"
#include "common/raw_enum.h"

namespace softverbs::provider {

namespace {

// Moves the work queue's QP to `state` (modify_qp with the state, and the
// port where INIT wants it).
int MoveQp(ibv_qp* qp, ibv_qp_state state) {
  ibv_qp_attr attr{};
  attr.qp_state = state;
  attr.port_num = 1;
  return ibv_modify_qp(qp, &attr, IBV_QP_STATE | (state == IBV_QPS_INIT ? IBV_QP_PORT : 0));
}

int PostWqRecv(ibv_wq* wq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return PostRecvOp(FromPublic<Wq>(wq)->qp, wr, bad_wr);
}

}  // namespace

ibv_wq* CreateWqOp(ibv_context* context, ibv_wq_init_attr* attr) {
  if (!context || !attr)
    return RejectNull(EINVAL, "ibv_create_wq: %s is NULL", !context ? "context" : "attr");
  if (attr->comp_mask & ~static_cast<uint32_t>(IBV_WQ_INIT_ATTR_FLAGS)) {
    return RejectNull(EINVAL, "ibv_create_wq: comp_mask 0x%x has unknown bits", attr->comp_mask);
  }
  if (RawEnum(attr->wq_type) != IBV_WQT_RQ) {
    return RejectNull(EINVAL, "ibv_create_wq: wq_type %u is not IBV_WQT_RQ",
                      RawEnum(attr->wq_type));
  }
  if ((attr->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) && attr->create_flags) {
    return RejectNull(attr->create_flags & ~(IBV_WQ_FLAGS_RESERVED - 1) ? EINVAL : EOPNOTSUPP,
                      "ibv_create_wq: create_flags 0x%x (VLAN stripping, FCS, delay drop, "
                      "padding) are not supported by softverbs",
                      attr->create_flags);
  }
  if (!attr->pd || !attr->cq) {
    return RejectNull(EINVAL, "ibv_create_wq: %s is NULL", !attr->pd ? "pd" : "cq");
  }
  if (attr->max_wr == 0) return RejectNull(EINVAL, "ibv_create_wq: max_wr is 0");
  auto* wq = new (std::nothrow) Wq{};
  if (!wq) return RejectNull(ENOMEM, "ibv_create_wq: out of memory");
  ibv_qp_init_attr_ex init{};
  init.qp_type = IBV_QPT_RAW_PACKET;
  init.comp_mask = IBV_QP_INIT_ATTR_PD;
  init.pd = attr->pd;
  init.send_cq = init.recv_cq = attr->cq;
  init.cap.max_recv_wr = attr->max_wr;
  init.cap.max_recv_sge = attr->max_sge;
  wq->qp = CreateWorkQueueQp(context, &init);
  if (!wq->qp) {
    const int err = errno;
    delete wq;
    errno = err;
    return nullptr;
  }
  // RESET: receives may be posted, nothing arrives (the QP in INIT).
  if (int err = MoveQp(wq->qp, IBV_QPS_INIT)) {
    ibv_destroy_qp(wq->qp);
    delete wq;
    errno = err;
    return nullptr;
  }
  attr->max_wr = init.cap.max_recv_wr;
  attr->max_sge = init.cap.max_recv_sge;
  ibv_wq& w = wq->ibv;
  w.context = context;
  w.wq_context = attr->wq_context;
  w.pd = attr->pd;
  w.cq = attr->cq;
  w.wq_num = wq->qp->qp_num;
  w.handle = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(wq->qp))->handle;
  w.state = IBV_WQS_RESET;
  w.wq_type = IBV_WQT_RQ;
  w.post_recv = PostWqRecv;
  pthread_mutex_init(&w.mutex, nullptr);
  pthread_cond_init(&w.cond, nullptr);
  return &w;
}

int ModifyWqOp(ibv_wq* ibwq, ibv_wq_attr* attr) {
  if (!ibwq || !attr) return Reject(EINVAL, "ibv_modify_wq: %s is NULL", !ibwq ? "wq" : "attr");
  Wq* wq = FromPublic<Wq>(ibwq);
  if (attr->attr_mask & ~static_cast<uint32_t>(IBV_WQ_ATTR_RESERVED - 1)) {
    return Reject(EINVAL, "ibv_modify_wq: attr_mask 0x%x has unknown bits", attr->attr_mask);
  }
  if ((attr->attr_mask & IBV_WQ_ATTR_FLAGS) && (attr->flags_mask & attr->flags)) {
    return Reject(EOPNOTSUPP, "ibv_modify_wq: flags 0x%x are not supported by softverbs",
                  attr->flags_mask & attr->flags);
  }
  if (!(attr->attr_mask & IBV_WQ_ATTR_STATE)) return 0;
  const uint32_t cur = (attr->attr_mask & IBV_WQ_ATTR_CURR_STATE)
                           ? RawEnum(attr->curr_wq_state)
                           : static_cast<uint32_t>(ibwq->state);
  const uint32_t next = RawEnum(attr->wq_state);
  if (cur != static_cast<uint32_t>(ibwq->state)) {
    return Reject(EINVAL, "ibv_modify_wq: curr_wq_state %u is not the WQ's state %u", cur,
                  static_cast<uint32_t>(ibwq->state));
  }
  // The receive queue's states (mlx5's RQ: RST->RDY, RDY->ERR, RDY/ERR->RST);
  // ERR does not go back to RDY without RESET.
  const bool allowed = next == cur || (cur == IBV_WQS_RESET && next == IBV_WQS_RDY) ||
                       (cur == IBV_WQS_RDY && next == IBV_WQS_ERR) ||
                       (cur != IBV_WQS_RESET && next == IBV_WQS_RESET && cur <= IBV_WQS_ERR);
  if (next > IBV_WQS_ERR || !allowed) {
    return Reject(EINVAL, "ibv_modify_wq: WQ 0x%x cannot go from state %u to %u", ibwq->wq_num, cur,
                  next);
  }
  int err = 0;
  if (next == cur) {
    err = 0;
  } else if (next == IBV_WQS_RDY) {
    err = MoveQp(wq->qp, IBV_QPS_RTR);
  } else if (next == IBV_WQS_ERR) {
    err = MoveQp(wq->qp, IBV_QPS_ERR);
  } else {
    err = MoveQp(wq->qp, IBV_QPS_RESET);
    if (!err) err = MoveQp(wq->qp, IBV_QPS_INIT);
  }
  if (err) return err;
  ibwq->state = static_cast<ibv_wq_state>(next);
  return 0;
}

int DestroyWqOp(ibv_wq* ibwq) {
  if (!ibwq) return Reject(EINVAL, "ibv_destroy_wq: wq is NULL");
  Wq* wq = FromPublic<Wq>(ibwq);
  if (int err = ibv_destroy_qp(wq->qp)) return err;  // EBUSY while a table names it
  pthread_cond_destroy(&ibwq->cond);
  pthread_mutex_destroy(&ibwq->mutex);
  delete wq;
  return 0;
}

ibv_rwq_ind_table* CreateRwqIndTableOp(ibv_context* context, ibv_rwq_ind_table_init_attr* attr) {
  if (!context || !attr) {
    return RejectNull(EINVAL, "ibv_create_rwq_ind_table: %s is NULL",
                      !context ? "context" : "attr");
  }
  if (attr->comp_mask) {
    return RejectNull(EINVAL, "ibv_create_rwq_ind_table: comp_mask 0x%x has unknown bits",
                      attr->comp_mask);
  }
  if (attr->log_ind_tbl_size > limits::kMaxRwqIndTableLogSize) {
    return RejectNull(EINVAL, "ibv_create_rwq_ind_table: log_ind_tbl_size %u is above %u",
                      attr->log_ind_tbl_size, limits::kMaxRwqIndTableLogSize);
  }
  if (!attr->ind_tbl) return RejectNull(EINVAL, "ibv_create_rwq_ind_table: ind_tbl is NULL");
  protocol::CreateRwqIndTableRequest req{};
  req.log_size = attr->log_ind_tbl_size;
  for (uint32_t i = 0; i < (1u << attr->log_ind_tbl_size); ++i) {
    if (!attr->ind_tbl[i] || attr->ind_tbl[i]->context != context) {
      return RejectNull(EINVAL, "ibv_create_rwq_ind_table: entry %u is not a WQ of this context",
                        i);
    }
    req.wq[i] = attr->ind_tbl[i]->handle;
  }
  auto* table = new (std::nothrow) RwqIndTable{};
  if (!table) return RejectNull(ENOMEM, "ibv_create_rwq_ind_table: out of memory");
  protocol::CreateRwqIndTableReply reply{};
  if (int err =
          Context::From(context)->channel.Call(protocol::Op::kCreateRwqIndTable, req, &reply)) {
    delete table;
    errno = err;
    return nullptr;
  }
  table->handle = reply.handle;
  table->ibv.context = context;
  table->ibv.ind_tbl_handle = static_cast<int>(reply.handle);
  table->ibv.ind_tbl_num = static_cast<int>(reply.number);
  return &table->ibv;
}

int DestroyRwqIndTableOp(ibv_rwq_ind_table* ibtable) {
  if (!ibtable) return Reject(EINVAL, "ibv_destroy_rwq_ind_table: table is NULL");
  RwqIndTable* table = FromPublic<RwqIndTable>(ibtable);
  protocol::HandleRequest req{table->handle};
  if (int err =
          Context::From(ibtable->context)->channel.Call(protocol::Op::kDestroyRwqIndTable, req)) {
    return err;  // EBUSY while an RSS QP spreads over it
  }
  delete table;
  return 0;
}

}  // namespace softverbs::provider
