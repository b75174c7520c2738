// Queue pairs: create (ibv_create_qp, ibv_create_qp_ex), open (XRC receive
// QPs of another process), modify, query, destroy, multicast attachment.
// The daemon holds the QP and enforces the rules; this side translates
// between the public structs and the wire, and keeps ibv_qp.state in step.
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <new>

#include "abi/ibverbs/devx_queues.h"
#include "abi/ibverbs/event_lifetime.h"
#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/mlx5_alloc_type.h"
#include "abi/ibverbs/net_raw.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/parent_domain.h"
#include "abi/ibverbs/post_checks.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/qp_ex_ops.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/send_queue.h"
#include "abi/ibverbs/wq.h"
#include "common/log.h"
#include "common/raw_enum.h"
#include "softverbs/xrc_legacy.h"
#include "verbs/flow_rule.h"
#include "verbs/qp_names.h"

namespace softverbs::provider {
namespace {

constexpr uint32_t kKnownQpInitComp = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
                                      IBV_QP_INIT_ATTR_CREATE_FLAGS |
                                      IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE |
                                      IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
constexpr uint32_t kSupportedQpInitComp =
    IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
    IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
constexpr uint32_t kRssQpInitComp = IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;

// An RSS QP's table and hash (ibv_create_qp_ex with IND_TABLE and RX_HASH),
// checked as mlx5 checks them, into req. 0 or the errno.
int SetRss(const ibv_qp_init_attr_ex& attr, protocol::CreateQpRequest* req) {
  if ((attr.comp_mask & kRssQpInitComp) != kRssQpInitComp) {
    return Reject(EINVAL,
                  "ibv_create_qp_ex: an RSS QP needs both IBV_QP_INIT_ATTR_IND_TABLE "
                  "and IBV_QP_INIT_ATTR_RX_HASH");
  }
  if (attr.qp_type != IBV_QPT_RAW_PACKET) {
    return Reject(EINVAL, "ibv_create_qp_ex: only a raw packet QP spreads frames (RSS)");
  }
  if (!attr.rwq_ind_tbl) return Reject(EINVAL, "ibv_create_qp_ex: rwq_ind_tbl is NULL");
  const ibv_rx_hash_conf& hash = attr.rx_hash_conf;
  if (hash.rx_hash_function != IBV_RX_HASH_FUNC_TOEPLITZ) {
    return Reject(EOPNOTSUPP, "ibv_create_qp_ex: rx_hash_function %u is not Toeplitz",
                  hash.rx_hash_function);
  }
  if (hash.rx_hash_key_len != verbs::kRssKeyBytes || !hash.rx_hash_key) {
    return Reject(EINVAL, "ibv_create_qp_ex: a Toeplitz key is %u bytes (rx_hash_key_len %u)",
                  verbs::kRssKeyBytes, hash.rx_hash_key_len);
  }
  if (hash.rx_hash_fields_mask & ~verbs::kRssHashFields) {
    return Reject(EOPNOTSUPP,
                  "ibv_create_qp_ex: rx_hash_fields_mask 0x%llx has fields softverbs does not "
                  "hash (IPsec SPI, inner headers)",
                  static_cast<unsigned long long>(hash.rx_hash_fields_mask));
  }
  req->ind_table = FromPublic<RwqIndTable>(attr.rwq_ind_tbl)->handle;
  req->rx_hash_fields = hash.rx_hash_fields_mask;
  memcpy(req->rx_hash_key, hash.rx_hash_key, verbs::kRssKeyBytes);
  return 0;
}

Handle HandleOf(ibv_pd* pd) {
  return pd ? FromPublic<Pd>(pd)->handle : 0;
}
Handle HandleOf(ibv_cq* cq) {
  return cq ? FromPublic<Cq>(reinterpret_cast<ibv_cq_ex*>(cq))->handle : 0;
}
Handle HandleOf(ibv_srq* srq) {
  return srq ? FromPublic<Srq>(srq)->handle : 0;
}
Handle HandleOf(ibv_xrcd* xrcd) {
  return xrcd ? FromPublic<Xrcd>(xrcd)->handle : 0;
}

// `type` is the device's (Qp::type); the application sees its public one.
Qp* NewQp(ibv_context* context, Handle handle, uint32_t qpn, ibv_qp_type type, void* qp_context) {
  auto* qp = new (std::nothrow) Qp{};
  if (!qp) return nullptr;
  qp->handle = handle;
  qp->type = DatapathQpType(type);
  ibv_qp& q = qp->ibv.qp_base;
  q.context = context;
  q.qp_context = qp_context;
  q.handle = handle;
  q.qp_num = qpn;
  q.state = IBV_QPS_RESET;
  q.qp_type = verbs::PublicQpType(type);
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  InstallQpExOps(&qp->ibv);
  InstallDvQpExOps(qp);
  return qp;
}

}  // namespace

namespace {

// ibv_create_qp_ex of a QP the device knows as `type` (attr->qp_type, or a
// DC type for attr->qp_type IBV_QPT_DRIVER); dc_access_key: a DCT's.
ibv_qp* CreateQp(ibv_context* context, ibv_qp_init_attr_ex* attr, ibv_qp_type type,
                 uint64_t dc_access_key, bool work_queue = false) {
  // ibv_qp_type's range is 0..255 (IBV_QPT_DRIVER): beyond it the field may
  // not even be read as the enum; within it the daemon refuses the unknown.
  if (RawEnum(attr->qp_type) > 0xff) {
    return RejectNull(EINVAL, "ibv_create_qp_ex: qp_type %u is not a QP type",
                      RawEnum(attr->qp_type));
  }
  if (attr->comp_mask & ~kKnownQpInitComp) {
    Log("ibv_create_qp_ex: comp_mask 0x%x has unknown bits", attr->comp_mask);
    return FailNull<ibv_qp>(EINVAL);
  }
  if (attr->comp_mask & ~kSupportedQpInitComp) {
    Log("ibv_create_qp_ex: comp_mask 0x%x asks for TSO, which softverbs does not support",
        attr->comp_mask);
    return FailNull<ibv_qp>(EOPNOTSUPP);
  }
  // A receive work queue's QP is the library's (ibv_create_wq asks for no
  // capability, as the kernel's); the application's raw packet QPs need it.
  if (type == IBV_QPT_RAW_PACKET && !work_queue && !HasNetRawCapability()) {
    return RejectNull(EPERM,
                      "ibv_create_qp_ex: a raw packet QP needs CAP_NET_RAW, as the kernel asks "
                      "(it sends and receives the port's Ethernet frames)");
  }
  const bool is_recv = attr->qp_type == IBV_QPT_XRC_RECV;
  if (is_recv && !(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD)) {
    Log("ibv_create_qp_ex: an XRC_RECV QP needs IBV_QP_INIT_ATTR_XRCD");
    return FailNull<ibv_qp>(EINVAL);
  }
  if (!is_recv && !(attr->comp_mask & IBV_QP_INIT_ATTR_PD)) {
    Log("ibv_create_qp_ex: IBV_QP_INIT_ATTR_PD is required for this QP type");
    return FailNull<ibv_qp>(EINVAL);
  }
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) && !attr->pd) {
    return RejectNull(EINVAL, "ibv_create_qp_ex: IBV_QP_INIT_ATTR_PD is set but pd is NULL");
  }
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) && is_recv && !attr->xrcd) {
    return RejectNull(EINVAL, "ibv_create_qp_ex: IBV_QP_INIT_ATTR_XRCD is set but xrcd is NULL");
  }
  uint64_t send_ops = 0;
  if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    send_ops = attr->send_ops_flags;
    if (send_ops & ~SupportedSendOpsFlags(type)) {
      Log("ibv_create_qp_ex: send_ops_flags 0x%llx include operations this QP type cannot do",
          static_cast<unsigned long long>(send_ops));
      return FailNull<ibv_qp>(EOPNOTSUPP);
    }
  }
  Context* ctx = Context::From(context);
  if (int err = CheckMlx5AllocType("QP", "ibv_create_qp")) return FailNull<ibv_qp>(err);
  protocol::CreateQpRequest req{};
  req.qp_type = type;
  req.dc_access_key = dc_access_key;
  req.pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? HandleOf(attr->pd) : 0;
  req.send_cq = HandleOf(attr->send_cq);
  req.recv_cq = HandleOf(attr->recv_cq);
  req.srq = HandleOf(attr->srq);
  req.xrcd = (attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) ? HandleOf(attr->xrcd) : 0;
  req.sq_sig_all = attr->sq_sig_all;
  req.create_flags = (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) ? attr->create_flags : 0;
  req.cap = attr->cap;
  if (attr->comp_mask & kRssQpInitComp) {
    if (int err = SetRss(*attr, &req)) return FailNull<ibv_qp>(err);
  }
  protocol::CreateQpReply rep{};
  std::vector<int> fds;  // the QP's receive queue
  if (int err = ctx->channel.Call(protocol::Op::kCreateQp, &req, sizeof(req), &rep, sizeof(rep),
                                  nullptr, 0, nullptr, &fds)) {
    return FailNull<ibv_qp>(err);
  }
  Qp* qp = NewQp(context, rep.handle, rep.qpn, type, attr->qp_context);
  int map_err = qp ? (fds.empty() ? EPROTO : qp->rq_mapping.Map(fds[0])) : ENOMEM;
  for (int fd : fds) close(fd);
  if (map_err) {
    delete qp;
    qp = nullptr;
  }
  if (!qp) {
    protocol::HandleRequest undo{rep.handle, 0};
    ctx->channel.Call(protocol::Op::kDestroyQp, undo);
    return RejectNull(ENOMEM, "ibv_create_qp_ex: cannot map the QP's receive queue (%s)",
                      strerror(map_err ? map_err : ENOMEM));
  }
  ibv_qp& q = qp->ibv.qp_base;
  q.pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : nullptr;
  q.send_cq = (is_recv || req.ind_table) ? nullptr : attr->send_cq;
  q.recv_cq = (is_recv || type == IBV_QPT_XRC_SEND || req.ind_table) ? nullptr : attr->recv_cq;
  q.srq = attr->srq;
  qp->cap = rep.cap;
  qp->rq.Attach(qp->rq_mapping.base());
  qp->entry = ctx->table.valid() ? ctx->table.QpSlot(rep.qpn) : nullptr;
  qp->pdn = q.pd ? FromPublic<Pd>(q.pd)->pdn : 0;
  UseParentDomain(q.pd);
  qp->send_ops_flags = send_ops;
  qp->sq_sig_all = attr->sq_sig_all != 0;
  qp->has_qp_ex = (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
  qp->ibv.comp_mask = 0;
  attr->cap = rep.cap;
  // From the reply, not the ring's header: a QP that never receives leaves
  // its receive queue's pages untouched (memory per QP, docs/benchmarks.md).
  if (q.recv_cq && !q.srq && rep.cap.max_recv_wr != 0) {
    AttachReceiveQueue(FromPublic<Cq>(reinterpret_cast<ibv_cq_ex*>(q.recv_cq)), rep.qpn, &qp->rq);
  }
  ctx->Track(rep.handle, &q);
  {
    std::lock_guard lock(ctx->objects_mutex);
    ctx->qps.insert(qp);  // put in error if the device dies (device_fatal.h)
  }
  return &q;
}

}  // namespace

ibv_qp* CreateQpExOp(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  if (!context || !attr) {
    return RejectNull(EINVAL, "ibv_create_qp_ex: %s is NULL", !context ? "context" : "attr");
  }
  // IBV_QPT_DRIVER is mlx5dv_create_qp's (softverbs_create_dc_qp); the
  // device refuses it here.
  return CreateQp(context, attr, attr->qp_type, 0);
}

ibv_qp* CreateDcQp(ibv_context* context, ibv_qp_init_attr_ex* attr, bool dct,
                   uint64_t dc_access_key) {
  if (!context || !attr) {
    return RejectNull(EINVAL, "mlx5dv_create_qp: %s is NULL", !context ? "context" : "attr");
  }
  if (attr->qp_type != IBV_QPT_DRIVER) {
    return RejectNull(EINVAL, "mlx5dv_create_qp: a DC QP is of type IBV_QPT_DRIVER");
  }
  return CreateQp(context, attr, dct ? verbs::kQptDcTgt : verbs::kQptDcIni,
                  dct ? dc_access_key : 0);
}

ibv_qp* CreateWorkQueueQp(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  return CreateQp(context, attr, IBV_QPT_RAW_PACKET, 0, true);
}

ibv_qp* OpenQpOp(ibv_context* context, ibv_qp_open_attr* attr) {
  if (!context || !attr) {
    return RejectNull(EINVAL, "ibv_open_qp: %s is NULL", !context ? "context" : "attr");
  }
  if (attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED) {
    return RejectNull(EINVAL, "ibv_open_qp: comp_mask 0x%x has unknown bits", attr->comp_mask);
  }
  constexpr uint32_t kRequired =
      IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if ((attr->comp_mask & kRequired) != kRequired || !attr->xrcd) {
    Log("ibv_open_qp: comp_mask needs IBV_QP_OPEN_ATTR_NUM|XRCD|TYPE");
    return FailNull<ibv_qp>(EINVAL);
  }
  Context* ctx = Context::From(context);
  // The daemon checks the type (only XRC_RECV); after that it may be loaded.
  protocol::OpenQpRequest req{HandleOf(attr->xrcd), attr->qp_num, RawEnum(attr->qp_type), 0};
  protocol::OpenQpReply rep{};
  if (int err = ctx->channel.Call(protocol::Op::kOpenQp, req, &rep)) {
    return FailNull<ibv_qp>(err);
  }
  void* qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : nullptr;
  Qp* qp = NewQp(context, rep.handle, rep.qpn, attr->qp_type, qp_context);
  if (!qp) return RejectNull(ENOMEM, "ibv_open_qp: out of memory for the QP");
  qp->ibv.qp_base.state = static_cast<ibv_qp_state>(rep.state);
  ctx->Track(rep.handle, &qp->ibv.qp_base);
  return &qp->ibv.qp_base;
}

}  // namespace softverbs::provider

using namespace softverbs::provider;
using softverbs::Log;
using softverbs::RawEnum;
namespace protocol = softverbs::protocol;

SV_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (!pd || !attr) return RejectNull(EINVAL, "ibv_create_qp: %s is NULL", !pd ? "pd" : "attr");
  // The legacy OFED send QP: attr is really a struct ibv_xrc_qp_init_attr
  // (xrc_domain trailing); it runs as an XRC_SEND QP of that PD.
  if (RawEnum(attr->qp_type) > 0xff) {
    return RejectNull(EINVAL, "ibv_create_qp: qp_type %u is not a QP type", RawEnum(attr->qp_type));
  }
  const bool legacy_xrc = attr->qp_type == kLegacyQptXrc;
  if (legacy_xrc && !reinterpret_cast<ibv_xrc_qp_init_attr*>(attr)->xrc_domain) {
    Log("ibv_create_qp: an IBV_QPT_XRC QP needs xrc_domain (struct ibv_xrc_qp_init_attr)");
    return FailNull<ibv_qp>(EINVAL);
  }
  ibv_qp_init_attr_ex ex{};
  ex.qp_context = attr->qp_context;
  ex.send_cq = attr->send_cq;
  ex.recv_cq = attr->recv_cq;
  ex.srq = attr->srq;
  ex.cap = attr->cap;
  ex.qp_type = DatapathQpType(attr->qp_type);
  ex.sq_sig_all = attr->sq_sig_all;
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  ibv_qp* qp = CreateQpExOp(pd->context, &ex);
  if (!qp) return nullptr;
  attr->cap = ex.cap;
  if (legacy_xrc) qp->qp_type = kLegacyQptXrc;  // as OFED reports it
  return qp;
}

SV_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  if (!qp) return RejectNull(EINVAL, "ibv_qp_to_qp_ex: qp is NULL");
  Qp* q = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(qp));
  if (!q->has_qp_ex) {
    return RejectNull(EOPNOTSUPP,
                      "ibv_qp_to_qp_ex: QP 0x%x was created without "
                      "IBV_QP_INIT_ATTR_SEND_OPS_FLAGS",
                      qp->qp_num);
  }
  return &q->ibv;
}

SV_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  if (!qp || !attr) return Reject(EINVAL, "ibv_modify_qp: %s is NULL", !qp ? "qp" : "attr");
  Qp* q = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(qp));
  protocol::ModifyQpRequest req{};
  req.handle = q->handle;
  req.mask = static_cast<uint32_t>(attr_mask);
  req.attr = *attr;
  Context* ctx = Context::From(qp->context);
  // Before the modify: a successful RTS->SQD is the only modify that may
  // start a drain notification. Only errors move a QP behind the cached
  // state's back, to SQE/ERR, from which SQD is not reachable, so a cached
  // RTS that SQD accepted was the real one.
  const ibv_qp_state before = qp->state;
  if (int err = ctx->channel.Call(protocol::Op::kModifyQp, req)) {
    return err;
  }
  // As libibverbs: the cached state follows a successful modify only.
  if (attr_mask & IBV_QP_STATE) qp->state = attr->qp_state;
  if (attr_mask & IBV_QP_STATE) {
    OnQpStateChanged(q, qp->state);
    const bool notify = qp->state == IBV_QPS_SQD && before == IBV_QPS_RTS &&
                        (attr_mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && attr->en_sqd_async_notify;
    if (notify && RequesterOf(q).path_leaves_host) {
      // Its send queue is the device's network transport, which raises
      // IBV_EVENT_SQ_DRAINED itself (docs/roce.md).
    } else if (notify) {
      StartDrainNotify(q);
    } else if (qp->state != IBV_QPS_SQD) {
      CancelDrainNotify(q);
    }
    // SQD->RTS releases the sends posted in SQD (any other way into RTS
    // finds none held).
    if (qp->state == IBV_QPS_RTS) ResumeSends(q);
  }
  return 0;
}

SV_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
                           ibv_qp_init_attr* init_attr) {
  if (!qp || !attr || !init_attr) {
    return Reject(EINVAL, "ibv_query_qp: %s is NULL", !qp ? "qp" : !attr ? "attr" : "init_attr");
  }
  // Like hardware drivers, every attribute is returned, whatever attr_mask.
  Qp* q = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(qp));
  protocol::HandleRequest req{q->handle, 0};
  protocol::QueryQpReply rep{};
  if (int err = Context::From(qp->context)->channel.Call(protocol::Op::kQueryQp, req, &rep)) {
    return err;
  }
  *attr = rep.attr;
  memset(init_attr, 0, sizeof(*init_attr));
  init_attr->qp_context = qp->qp_context;
  init_attr->send_cq = qp->send_cq;
  init_attr->recv_cq = qp->recv_cq;
  init_attr->srq = qp->srq;
  init_attr->cap = rep.init_cap;
  // The daemon knows a legacy IBV_QPT_XRC QP as XRC_SEND and a DC QP by its
  // DC type; report the type the application created.
  init_attr->qp_type = qp->qp_type;
  init_attr->sq_sig_all = static_cast<int>(rep.sq_sig_all);
  // As libibverbs: the cached state follows a query that asked for it.
  if (attr_mask & IBV_QP_STATE) qp->state = attr->qp_state;
  return 0;
}

SV_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  if (!qp) return Reject(EINVAL, "ibv_destroy_qp: qp is NULL");
  Qp* q = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(qp));
  Context* ctx = Context::From(qp->context);
  protocol::HandleRequest req{q->handle, 0};
  if (int err = ctx->channel.Call(protocol::Op::kDestroyQp, req)) {
    return err;
  }
  // Untracked, no further event can be handed out for the QP: wait until
  // each one that was has been acknowledged (event_lifetime.h).
  ctx->Untrack(q->handle);
  {
    std::lock_guard lock(ctx->objects_mutex);
    ctx->qps.erase(q);
  }
  DropUnreadEventsOfDestroyedObjects(ctx);
  WaitUnderMutex(&qp->mutex, &qp->cond, [&] { return qp->events_completed == q->events_reported; });
  ForgetQp(ctx, q);
  ForgetDvQueue(ctx, DvQueueKind::kQp, qp->qp_num);  // mlx5 buffers of mlx5dv_init_obj, if any
  // The QP is unpublished: nothing completes on it any more.
  CleanQpCompletions(q);
  if (qp->recv_cq && !qp->srq && q->cap.max_recv_wr != 0) {
    DetachReceiveQueue(FromPublic<Cq>(reinterpret_cast<ibv_cq_ex*>(qp->recv_cq)), qp->qp_num);
  }
  UnuseParentDomain(qp->pd);
  pthread_cond_destroy(&qp->cond);
  pthread_mutex_destroy(&qp->mutex);
  delete q;
  return 0;
}

namespace {
int Mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid, protocol::Op op) {
  if (!qp || !gid) {
    return Reject(EINVAL, "%s: %s is NULL",
                  op == protocol::Op::kAttachMcast ? "ibv_attach_mcast" : "ibv_detach_mcast",
                  !qp ? "qp" : "gid");
  }
  protocol::McastRequest req{};
  req.qp = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(qp))->handle;
  req.lid = lid;
  memcpy(req.gid, gid->raw, 16);
  return Context::From(qp->context)->channel.Call(op, req);
}
}  // namespace

SV_EXPORT int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  return Mcast(qp, gid, lid, protocol::Op::kAttachMcast);
}

SV_EXPORT int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  return Mcast(qp, gid, lid, protocol::Op::kDetachMcast);
}
