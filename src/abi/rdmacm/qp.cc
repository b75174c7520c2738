// QPs and SRQs of ids: rdma_create_qp(_ex), rdma_destroy_qp,
// rdma_create_srq(_ex), rdma_destroy_srq, rdma_init_qp_attr, and the QP
// transitions librdmacm makes for the user.
#include <errno.h>
#include <rdma/rdma_verbs.h>
#include <string.h>

#include "abi/rdmacm/cm_internal.h"

using namespace softverbs::rdmacm;
using softverbs::protocol::CmReply;
using softverbs::protocol::CmRequest;
using softverbs::protocol::Op;

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

SV_EXPORT int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (!id || !qp_attr || !qp_attr_mask) {
    return RejectMinusOne(EINVAL, "rdma_init_qp_attr: id, qp_attr or qp_attr_mask is NULL");
  }
  CmRequest req = RequestFor(IdOf(id));
  req.qp_state = qp_attr->qp_state;
  CmReply rep{};
  if (Call(Op::kCmInitQpAttr, req, &rep)) return -1;
  *qp_attr = rep.qp_attr;
  *qp_attr_mask = rep.qp_attr_mask;
  const Id* priv = IdOf(id);
  if ((rep.qp_attr_mask & IBV_QP_TIMEOUT) && priv->ack_timeout_set) {
    qp_attr->timeout = priv->ack_timeout;
  }
  return 0;
}

namespace softverbs::rdmacm {

namespace {

int Modify(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  int err = ibv_modify_qp(qp, attr, mask);
  if (err) {
    errno = err;
    return -1;
  }
  return 0;
}

void DestroyCqs(rdma_cm_id* id) {
  if (id->recv_cq) {
    ibv_destroy_cq(id->recv_cq);
    if (id->send_cq && id->send_cq != id->recv_cq) ibv_destroy_cq(id->send_cq);
    id->send_cq = nullptr;
    id->recv_cq = nullptr;
  } else if (id->send_cq) {
    ibv_destroy_cq(id->send_cq);
    id->send_cq = nullptr;
  }
  if (id->recv_cq_channel) {
    ibv_destroy_comp_channel(id->recv_cq_channel);
    if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel) {
      ibv_destroy_comp_channel(id->send_cq_channel);
    }
    id->send_cq_channel = nullptr;
    id->recv_cq_channel = nullptr;
  } else if (id->send_cq_channel) {
    ibv_destroy_comp_channel(id->send_cq_channel);
    id->send_cq_channel = nullptr;
  }
}

// librdmacm creates a CQ (with its own completion channel) for each side
// the caller did not give one for.
int CreateCqs(rdma_cm_id* id, uint32_t send_size, uint32_t recv_size) {
  if (recv_size) {
    id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->recv_cq_channel) goto err;
    id->recv_cq = ibv_create_cq(id->verbs, static_cast<int>(recv_size), id, id->recv_cq_channel, 0);
    if (!id->recv_cq) goto err;
  }
  if (send_size) {
    id->send_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->send_cq_channel) goto err;
    id->send_cq = ibv_create_cq(id->verbs, static_cast<int>(send_size), id, id->send_cq_channel, 0);
    if (!id->send_cq) goto err;
  }
  return 0;
err:
  DestroyCqs(id);
  return -1;
}

}  // namespace

int ModifyQpRtr(Id* id, uint8_t responder_resources) {
  ibv_qp* qp = id->id.qp;
  if (!qp) return 0;
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;  // the access flags the connection allows
  if (rdma_init_qp_attr(&id->id, &attr, &mask) || Modify(qp, &attr, mask)) return -1;
  attr.qp_state = IBV_QPS_RTR;
  if (rdma_init_qp_attr(&id->id, &attr, &mask)) return -1;
  if (responder_resources != RDMA_MAX_RESP_RES) attr.max_dest_rd_atomic = responder_resources;
  return Modify(qp, &attr, mask);
}

int ModifyQpRts(Id* id, uint8_t initiator_depth) {
  ibv_qp* qp = id->id.qp;
  if (!qp) return 0;
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_RTS;
  if (rdma_init_qp_attr(&id->id, &attr, &mask)) return -1;
  if (initiator_depth != RDMA_MAX_INIT_DEPTH) attr.max_rd_atomic = initiator_depth;
  return Modify(qp, &attr, mask);
}

int ModifyQpErr(Id* id) {
  ibv_qp* qp = id->id.qp;
  if (!qp) return 0;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return Modify(qp, &attr, IBV_QP_STATE);
}

}  // namespace softverbs::rdmacm

namespace {

// INIT for a connected QP; INIT, RTR, RTS for a UD QP (ready to send).
int InitQp(Id* id, ibv_qp* qp) {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  if (rdma_init_qp_attr(&id->id, &attr, &mask)) return -1;
  int err = ibv_modify_qp(qp, &attr, mask);
  if (!err && id->id.qp_type == IBV_QPT_UD) {
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTR;
    err = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
    if (!err) {
      attr.qp_state = IBV_QPS_RTS;
      attr.sq_psn = 0;
      err = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
  }
  if (err) {
    errno = err;
    return -1;
  }
  return 0;
}

}  // namespace

SV_EXPORT int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (!id || !attr) return RejectMinusOne(EINVAL, "rdma_create_qp_ex: id or attr is NULL");
  if (id->qp) return RejectMinusOne(EINVAL, "rdma_create_qp_ex: the id has a QP already");
  if (!id->verbs) {
    return RejectMinusOne(EINVAL,
                          "rdma_create_qp_ex: the id is not bound to a device (resolve "
                          "or bind an address first)");
  }
  const bool xrc_recv = id->qp_type == IBV_QPT_XRC_RECV;
  if (xrc_recv) {
    // An XRC receive QP belongs to an XRC domain, not a PD, and has no
    // queues of its own: the id's XRC SRQs receive (as librdmacm does).
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd) {
      attr->xrcd = XrcdOfDevice();
      if (!attr->xrcd) return -1;
      attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
    }
    attr->comp_mask &= ~IBV_QP_INIT_ATTR_PD;
    attr->pd = nullptr;
    attr->cap.max_send_wr = attr->cap.max_recv_wr = 0;
    attr->cap.max_send_sge = attr->cap.max_recv_sge = 0;
  } else if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr->pd = id->pd;
  } else if (attr->pd->context != id->verbs) {
    return RejectMinusOne(EINVAL, "rdma_create_qp_ex: the PD is of another device context");
  }
  if (id->qp_type == IBV_QPT_XRC_SEND) attr->cap.max_recv_wr = attr->cap.max_recv_sge = 0;
  // The QP is of the type the caller asked for (librdmacm passes attr on as
  // it is): a UC QP on an RDMA_PS_TCP id stays UC.
  if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
      (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq)) {
    return RejectMinusOne(EINVAL, "rdma_create_qp_ex: the CQs differ from the id's CQs");
  }
  if (CreateCqs(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
                attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr)) {
    return -1;
  }
  if (!xrc_recv) {
    if (!attr->send_cq) attr->send_cq = id->send_cq;
    if (!attr->recv_cq) attr->recv_cq = id->recv_cq;
    if (id->srq && !attr->srq && id->qp_type != IBV_QPT_XRC_SEND) attr->srq = id->srq;
  }
  ibv_qp* qp = ibv_create_qp_ex(id->verbs, attr);
  if (!qp) {
    int err = errno;
    DestroyCqs(id);
    errno = err;
    return -1;
  }
  if (InitQp(IdOf(id), qp)) {
    int err = errno;
    ibv_destroy_qp(qp);
    DestroyCqs(id);
    errno = err;
    return -1;
  }
  if (!xrc_recv) id->pd = qp->pd;
  id->qp = qp;
  return 0;
}

SV_EXPORT int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!id || !qp_init_attr) {
    return RejectMinusOne(EINVAL, "rdma_create_qp: id or qp_init_attr is NULL");
  }
  ibv_qp_init_attr_ex attr_ex{};
  memcpy(&attr_ex, qp_init_attr, sizeof(*qp_init_attr));
  attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr_ex.pd = pd ? pd : id->pd;
  int ret = rdma_create_qp_ex(id, &attr_ex);
  memcpy(qp_init_attr, &attr_ex, sizeof(*qp_init_attr));
  return ret;
}

SV_EXPORT void rdma_destroy_qp(rdma_cm_id* id) {
  if (!id) return;
  if (id->qp) ibv_destroy_qp(id->qp);
  id->qp = nullptr;
  // An XRC receive id's CQ serves its SRQ, which rdma_destroy_srq takes
  // down with it (librdmacm's ucma_destroy_cqs).
  if (id->qp_type == IBV_QPT_XRC_RECV && id->srq) return;
  DestroyCqs(id);
}

SV_EXPORT int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (!id || !attr) return RejectMinusOne(EINVAL, "rdma_create_srq_ex: id or attr is NULL");
  if (!id->verbs) {
    return RejectMinusOne(EINVAL, "rdma_create_srq_ex: the id is not bound to a device");
  }
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) {
    return RejectMinusOne(EINVAL, "rdma_create_srq_ex: comp_mask lacks IBV_SRQ_INIT_ATTR_TYPE");
  }
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = id->pd;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  }
  if (attr->srq_type == IBV_SRQT_XRC) {
    // In the device's XRC domain, completing on the id's receive CQ (made
    // here if the caller gave none), as librdmacm's rdma_create_srq_ex.
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
      attr->xrcd = XrcdOfDevice();
      if (!attr->xrcd) return -1;
    }
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
      if (!id->recv_cq && CreateCqs(id, 0, attr->attr.max_wr)) return -1;
      attr->cq = id->recv_cq;
    }
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  }
  ibv_srq* srq = ibv_create_srq_ex(id->verbs, attr);
  if (!srq) return -1;
  if (!id->pd) id->pd = attr->pd;
  id->srq = srq;
  return 0;
}

SV_EXPORT int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!id || !attr) return RejectMinusOne(EINVAL, "rdma_create_srq: id or attr is NULL");
  ibv_srq_init_attr_ex attr_ex{};
  memcpy(&attr_ex, attr, sizeof(*attr));
  attr_ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  // An XRC receive id's SRQ is an XRC SRQ (librdmacm's rule).
  attr_ex.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
  attr_ex.pd = pd;
  int ret = rdma_create_srq_ex(id, &attr_ex);
  memcpy(attr, &attr_ex, sizeof(*attr));
  return ret;
}

SV_EXPORT void rdma_destroy_srq(rdma_cm_id* id) {
  if (!id) return;
  if (id->srq) ibv_destroy_srq(id->srq);
  id->srq = nullptr;
  DestroyCqs(id);
}
