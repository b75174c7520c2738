// Connections: rdma_connect, rdma_accept, rdma_reject(_ece), rdma_establish,
// rdma_disconnect, rdma_get_request. The library moves the id's QP through
// its states (INIT -> RTR -> RTS before REP or RTU, ERR on disconnect and
// reject) with the attributes rdma_init_qp_attr answers, as librdmacm does.
#include <errno.h>
#include <string.h>

#include "abi/rdmacm/cm_internal.h"

using namespace softverbs::rdmacm;
using softverbs::protocol::CmConnParam;
using softverbs::protocol::CmRequest;
using softverbs::protocol::Op;

namespace {

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

// IBTA 12.6 private data sizes (REQ less the rdma_cm IP header).
constexpr uint8_t kReqPrivateData = 56;
constexpr uint8_t kSidrReqPrivateData = 180;
constexpr uint8_t kRepPrivateData = 196;
constexpr uint8_t kRejPrivateData = 148;

bool IsUd(const Id* id) {
  return id->id.qp_type == IBV_QPT_UD;
}

// librdmacm's ucma_valid_param.
int ValidParam(const char* verb, Id* id, const rdma_conn_param* param) {
  if (id->id.ps != RDMA_PS_TCP) return 0;
  if (!id->id.qp && !param) {
    return RejectMinusOne(EINVAL, "%s: the id has no QP and conn_param is NULL", verb);
  }
  if (!param) return 0;
  const Device& dev = TheDevice();
  if (param->responder_resources != RDMA_MAX_RESP_RES &&
      param->responder_resources > dev.max_responder_resources) {
    return RejectMinusOne(EINVAL, "%s: responder_resources %u is above the device's %u", verb,
                          param->responder_resources, dev.max_responder_resources);
  }
  if (param->initiator_depth != RDMA_MAX_INIT_DEPTH &&
      param->initiator_depth > dev.max_initiator_depth) {
    return RejectMinusOne(EINVAL, "%s: initiator_depth %u is above the device's %u", verb,
                          param->initiator_depth, dev.max_initiator_depth);
  }
  return 0;
}

// librdmacm's ucma_copy_conn_param_to_kern; false when the private data
// does not fit.
bool FillConn(Id* id, const rdma_conn_param* src, uint32_t qp_num, uint8_t srq, uint8_t limit,
              CmConnParam* dst) {
  dst->qp_num = qp_num;
  dst->srq = srq;
  dst->responder_resources = id->responder_resources;
  dst->initiator_depth = id->initiator_depth;
  size_t len = id->connect_data.size();
  if (src && src->private_data && src->private_data_len) len += src->private_data_len;
  if (len > limit) return false;
  if (!id->connect_data.empty()) {  // data() of an empty vector may be NULL: no memcpy from it
    memcpy(dst->private_data, id->connect_data.data(), id->connect_data.size());
  }
  dst->private_data_len = static_cast<uint8_t>(id->connect_data.size());
  if (src) {
    dst->flow_control = src->flow_control;
    dst->retry_count = src->retry_count;
    dst->rnr_retry_count = src->rnr_retry_count;
    if (src->private_data && src->private_data_len) {
      memcpy(dst->private_data + dst->private_data_len, src->private_data, src->private_data_len);
      dst->private_data_len += src->private_data_len;
    }
  } else {
    dst->retry_count = 7;
    dst->rnr_retry_count = 7;
  }
  return true;
}

bool NotOnDevice(const char* verb, rdma_cm_id* id) {
  if (id->verbs) return false;
  RejectMinusOne(EINVAL, "%s: the id is not bound to a device (resolve or bind an address first)",
                 verb);
  return true;
}

}  // namespace

namespace softverbs::rdmacm {

int ProcessConnectResponse(Id* id) {
  if (ModifyQpRtr(id, RDMA_MAX_RESP_RES) || ModifyQpRts(id, RDMA_MAX_INIT_DEPTH)) {
    int err = errno;
    ModifyQpErr(id);
    errno = err;
    return -1;
  }
  if (Call(Op::kCmEstablish, RequestFor(id), nullptr)) {
    int err = errno;
    ModifyQpErr(id);
    errno = err;
    return -1;
  }
  return 0;
}

}  // namespace softverbs::rdmacm

SV_EXPORT int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_connect: id is NULL");
  if (NotOnDevice("rdma_connect", id)) return -1;
  Id* priv = IdOf(id);
  if (ValidParam("rdma_connect", priv, conn_param)) return -1;
  const Device& dev = TheDevice();
  priv->initiator_depth = conn_param && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH
                              ? conn_param->initiator_depth
                              : dev.max_initiator_depth;
  priv->responder_resources = conn_param && conn_param->responder_resources != RDMA_MAX_RESP_RES
                                  ? conn_param->responder_resources
                                  : dev.max_responder_resources;
  uint32_t qp_num = conn_param ? conn_param->qp_num : 0;
  uint8_t srq = conn_param ? conn_param->srq : 0;
  if (id->qp) {
    qp_num = id->qp->qp_num;
    srq = id->qp->srq != nullptr;
  }
  CmRequest req = RequestFor(priv);
  const uint8_t limit = IsUd(priv) ? kSidrReqPrivateData : kReqPrivateData;
  if (!FillConn(priv, conn_param, qp_num, srq, limit, &req.conn)) {
    return RejectMinusOne(EINVAL,
                          "rdma_connect: private data of %u bytes is above the %u a %s "
                          "carries",
                          conn_param->private_data_len, limit, IsUd(priv) ? "SIDR REQ" : "REQ");
  }
  if (Call(Op::kCmConnect, req, nullptr)) return -1;
  priv->connect_data.clear();
  return Complete(priv);
}

SV_EXPORT int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_accept: id is NULL");
  if (!id->qp && !conn_param) {
    return RejectMinusOne(EINVAL, "rdma_accept: the id has no QP and conn_param is NULL");
  }
  Id* priv = IdOf(id);
  if (ValidParam("rdma_accept", priv, conn_param)) return -1;
  const Device& dev = TheDevice();
  uint32_t qp_num = id->qp ? id->qp->qp_num : conn_param->qp_num;
  uint8_t srq = id->qp ? id->qp->srq != nullptr : conn_param->srq;
  if (!conn_param || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH) {
    priv->initiator_depth = std::min(priv->initiator_depth, dev.max_initiator_depth);
  } else {
    priv->initiator_depth = conn_param->initiator_depth;
  }
  if (!conn_param || conn_param->responder_resources == RDMA_MAX_RESP_RES) {
    priv->responder_resources = std::min(priv->responder_resources, dev.max_responder_resources);
  } else {
    priv->responder_resources = conn_param->responder_resources;
  }
  if (!IsUd(priv)) {
    if (ModifyQpRtr(priv, priv->responder_resources)) return -1;
    if (ModifyQpRts(priv, priv->initiator_depth)) return -1;
  }
  CmRequest req = RequestFor(priv);
  if (!FillConn(priv, conn_param, qp_num, srq, kRepPrivateData, &req.conn)) {
    return RejectMinusOne(EINVAL,
                          "rdma_accept: private data of %u bytes is above the %u a REP "
                          "carries",
                          conn_param->private_data_len, kRepPrivateData);
  }
  if (IsUd(priv)) req.conn.qkey = RDMA_UDP_QKEY;
  if (Call(Op::kCmAccept, req, nullptr)) {
    int err = errno;
    ModifyQpErr(priv);
    errno = err;
    return -1;
  }
  // UD: done (librdmacm keeps a synchronous id's request event in
  // id->event until its next call that waits, or rdma_destroy_id).
  if (IsUd(priv)) return 0;
  return Complete(priv);
}

namespace {

// rdma_reject with the REJ's reason (0: consumer defined, 28).
int RejectWithReason(rdma_cm_id* id, const void* private_data, uint8_t private_data_len,
                     uint8_t reason) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_reject: id is NULL");
  if (private_data_len > kRejPrivateData) {
    return RejectMinusOne(EINVAL,
                          "rdma_reject: private data of %u bytes is above the %u a REJ "
                          "carries",
                          private_data_len, kRejPrivateData);
  }
  CmRequest req = RequestFor(IdOf(id));
  if (private_data && private_data_len) {
    memcpy(req.conn.private_data, private_data, private_data_len);
    req.conn.private_data_len = private_data_len;
  }
  req.conn.reject_reason = reason;
  return Call(Op::kCmReject, req, nullptr);
}

}  // namespace

SV_EXPORT int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return RejectWithReason(id, private_data, private_data_len, 0);
}

// As librdmacm: the REJ says 35, IBTA's "vendor option not supported".
SV_EXPORT int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return RejectWithReason(id, private_data, private_data_len, 35);
}

SV_EXPORT int rdma_establish(rdma_cm_id* id) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_establish: id is NULL");
  if (id->qp) {
    return RejectMinusOne(EINVAL,
                          "rdma_establish: the id has a QP (librdmacm establishes it "
                          "itself)");
  }
  return ProcessConnectResponse(IdOf(id));
}

SV_EXPORT int rdma_disconnect(rdma_cm_id* id) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_disconnect: id is NULL");
  if (NotOnDevice("rdma_disconnect", id)) return -1;
  Id* priv = IdOf(id);
  if (ModifyQpErr(priv)) return -1;
  if (Call(Op::kCmDisconnect, RequestFor(priv), nullptr)) return -1;
  return Complete(priv);
}

SV_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (!listen || !id) return RejectMinusOne(EINVAL, "rdma_get_request: listen or id is NULL");
  Id* priv = IdOf(listen);
  if (!priv->sync) {
    return RejectMinusOne(EINVAL,
                          "rdma_get_request: the listening id is not synchronous "
                          "(it has an event channel: use rdma_get_cm_event)");
  }
  if (listen->event) {
    rdma_ack_cm_event(listen->event);
    listen->event = nullptr;
  }
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(listen->channel, &event)) return -1;
  int ret = 0;
  if (event->status) {
    errno = event->status < 0 ? -event->status : event->status;
    ret = -1;
  } else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    ret = RejectMinusOne(EINVAL, "rdma_get_request: the next event is %s, not a request",
                         rdma_event_str(event->event));
  } else if (priv->qp_init_attr) {
    ibv_qp_init_attr attr = *priv->qp_init_attr;
    ret = rdma_create_qp(event->id, listen->pd, &attr);
  }
  if (ret) {
    listen->event = event;
    return ret;
  }
  *id = event->id;
  (*id)->event = event;
  return 0;
}
