// Create, open, query and destroy of QPs. Modify lives in qp_modify.cc.
#include <errno.h>
#include <string.h>

#include <bit>

#include "common/device_limits.h"
#include "daemon/device.h"
#include "verbs/qp_names.h"

namespace softverbs::daemon {

namespace lim = softverbs::limits;

namespace {

// Create flags that exist in rdma-core's enum ibv_qp_create_flags.
constexpr uint32_t kKnownCreateFlags =
    IBV_QP_CREATE_BLOCK_SELF_MCAST_LB | IBV_QP_CREATE_SCATTER_FCS | IBV_QP_CREATE_CVLAN_STRIPPING |
    IBV_QP_CREATE_SOURCE_QPN | IBV_QP_CREATE_PCI_WRITE_END_PADDING;
// ... and those softverbs honours.
constexpr uint32_t kSupportedCreateFlags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;

bool IsSupportedType(uint32_t type) {
  switch (type) {
    case IBV_QPT_RC:
    case IBV_QPT_UC:
    case IBV_QPT_UD:
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
    case IBV_QPT_RAW_PACKET:
      return true;
    default:
      return type == verbs::kQptDcIni || type == verbs::kQptDcTgt;
  }
}

Verdict CheckCap(const char* what, uint32_t value, int limit) {
  if (value > static_cast<uint32_t>(limit)) {
    return Verdict::Fail(EINVAL, std::string(what) + " " + std::to_string(value) +
                                     " is above the device limit " + std::to_string(limit));
  }
  return Verdict::Ok();
}

}  // namespace

Verdict Device::CreateQp(ClientId c, const protocol::CreateQpRequest& req,
                         protocol::CreateQpReply* out) {
  // Check.
  if (!IsSupportedType(req.qp_type)) {
    return Verdict::Fail(
        EOPNOTSUPP, "QP type " + std::to_string(req.qp_type) + " is not supported by softverbs");
  }
  const auto type = static_cast<ibv_qp_type>(req.qp_type);
  if (req.create_flags & ~kKnownCreateFlags) {
    return Verdict::Fail(EINVAL, "unknown create_flags bits");
  }
  if (req.create_flags & ~kSupportedCreateFlags) {
    return Verdict::Fail(EOPNOTSUPP,
                         "create_flags other than BLOCK_SELF_MCAST_LB are not supported");
  }
  const bool is_tgt = type == IBV_QPT_XRC_RECV;
  const bool is_ini = type == IBV_QPT_XRC_SEND;
  Pd* pd = nullptr;
  XrcdHandle* xh = nullptr;
  if (is_tgt) {
    xh = FindOwned(xrcd_handles_, c, req.xrcd);
    if (!xh) return Verdict::Fail(EINVAL, "XRC_RECV QP needs an XRC domain of this context");
  } else {
    pd = FindOwned(pds_, c, req.pd);
    if (!pd) return Verdict::Fail(EINVAL, "create_qp: no such PD in this context");
  }
  // An RSS QP (raw packet) receives into the work queues of its table and
  // sends nothing: no CQs, no queues of its own.
  RwqIndTable* ind_table = nullptr;
  if (req.ind_table) {
    if (type != IBV_QPT_RAW_PACKET) {
      return Verdict::Fail(EINVAL, "create_qp: only a raw packet QP spreads over a table (RSS)");
    }
    ind_table = FindOwned(ind_tables_, c, req.ind_table);
    if (!ind_table) {
      return Verdict::Fail(EINVAL,
                           "create_qp: ind_table is not an indirection table of this "
                           "context");
    }
    if (req.rx_hash_fields & ~verbs::kRssHashFields) {
      return Verdict::Fail(EOPNOTSUPP,
                           "create_qp: rx_hash_fields_mask has fields softverbs "
                           "does not hash (IPsec SPI, inner headers)");
    }
    if (req.srq) return Verdict::Fail(EINVAL, "create_qp: an RSS QP takes no SRQ");
  }
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;
  if (!is_tgt && !ind_table) {
    send_cq = FindVerbsCq(c, req.send_cq);
    if (!send_cq) return Verdict::Fail(EINVAL, "create_qp: send_cq is not a CQ of this context");
    if (!is_ini) {
      recv_cq = FindVerbsCq(c, req.recv_cq);
      if (!recv_cq) return Verdict::Fail(EINVAL, "create_qp: recv_cq is not a CQ of this context");
    }
  }
  // mlx5's DC QPs: a DCT receives through an SRQ only; a DCI sends only
  // (an SRQ it names is held, as the kernel holds any QP's, and unused).
  const bool is_dct = type == verbs::kQptDcTgt;
  const bool is_dci = type == verbs::kQptDcIni;
  if (is_dct && !req.srq) return Verdict::Fail(EINVAL, "create_qp: a DCT needs an SRQ");
  if (type == IBV_QPT_RAW_PACKET && req.srq) {
    return Verdict::Fail(EINVAL,
                         "create_qp: a raw packet QP receives into its own queue, not an SRQ");
  }
  if (req.srq && !is_tgt && !is_ini) {
    srq = FindOwned(srqs_, c, req.srq);
    if (!srq) return Verdict::Fail(EINVAL, "create_qp: srq is not an SRQ of this context");
    if (srq->type == IBV_SRQT_TM && type != IBV_QPT_RC) {
      return Verdict::Fail(EINVAL, "create_qp: a tag-matching SRQ backs RC QPs only");
    }
    if (srq->type != IBV_SRQT_BASIC && srq->type != IBV_SRQT_TM) {
      return Verdict::Fail(EINVAL, "create_qp: only a basic or TM SRQ can back an RC/UC/UD QP");
    }
  }
  ibv_qp_cap cap = req.cap;
  if (is_tgt || ind_table) cap = {};
  if (is_ini || is_dci || srq) cap.max_recv_wr = cap.max_recv_sge = 0;
  for (Verdict v : {CheckCap("max_send_wr", cap.max_send_wr, lim::kMaxQpWr),
                    CheckCap("max_recv_wr", cap.max_recv_wr, lim::kMaxQpWr),
                    CheckCap("max_send_sge", cap.max_send_sge, lim::kMaxSge),
                    CheckCap("max_recv_sge", cap.max_recv_sge, lim::kMaxSge),
                    CheckCap("max_inline_data", cap.max_inline_data, lim::kMaxInlineData)}) {
    if (!v.ok()) return v;
  }
  if (qps_.size() >= static_cast<size_t>(lim::kMaxQp)) {
    return Verdict::Fail(ENOMEM, "device limit max_qp reached");
  }
  // The receive ring holds a power of two of WQEs (datapath/recv_queue.h):
  // report what it holds, as mlx5 does, so that ibv_post_recv fails with
  // ENOMEM exactly after max_recv_wr outstanding WQEs (rdma-core's
  // full_rq_bad_flow posts cap.max_recv_wr + 1). kMaxQpWr is a power of two.
  if (!srq && !is_ini && !is_tgt && !is_dci && cap.max_recv_wr) {
    cap.max_recv_wr = std::bit_ceil(cap.max_recv_wr);
  }
  // A send WQE holds its SGEs or its inline bytes in the same room, so the
  // inline room is at least that of the SGEs (rxe: max_send_sge x 16 bytes;
  // mlx5 reports its WQE's room too): rdma_xclient sends 16 inline bytes on
  // a QP that asked for one SGE and no inline data.
  if (!is_tgt && !is_dct && cap.max_send_wr) {
    cap.max_inline_data = std::min<uint32_t>(
        std::max<uint32_t>(cap.max_inline_data, cap.max_send_sge * sizeof(ibv_sge)),
        static_cast<uint32_t>(lim::kMaxInlineData));
  }
  // Apply: a QP number unique on the device, never 0 or 1.
  const uint32_t qpn = AllocateQpn();
  if (qpn == 0) return Verdict::Fail(ENOMEM, "create_qp: no QP number left");
  Qp qp{};
  qp.qpn = qpn;
  qp.creator = c;
  qp.type = type;
  qp.pd = pd ? pd->handle : 0;
  qp.send_cq = send_cq ? send_cq->handle : 0;
  qp.recv_cq = recv_cq ? recv_cq->handle : 0;
  qp.srq = srq ? srq->handle : 0;
  qp.xrcd = xh ? xh->xrcd : 0;
  qp.cap = cap;
  qp.sq_sig_all = req.sq_sig_all ? 1 : 0;
  qp.create_flags = req.create_flags;
  qp.dc_access_key = is_dct ? req.dc_access_key : 0;
  if (ind_table) {
    qp.ind_table = ind_table->handle;
    qp.rx_hash_fields = req.rx_hash_fields;
    memcpy(qp.rx_hash_key.data(), req.rx_hash_key, qp.rx_hash_key.size());
  }
  // The receive queue peers deliver into (header only with an SRQ or none).
  qp.rq_fd =
      MakeRecvQueueFile(srq || is_ini || is_tgt || is_dci ? 0 : cap.max_recv_wr, cap.max_recv_sge);
  if (qp.rq_fd < 0) return Verdict::Fail(ENOMEM, "create_qp: cannot make the receive queue");
  if (pd) pd->users++;
  if (ind_table) ind_table->users++;
  if (send_cq) send_cq->users++;
  if (recv_cq) recv_cq->users++;
  if (srq) srq->users++;
  if (xh) {
    xrcds_[xh->xrcd].users++;
    xh->users++;
  }
  Handle h = NextHandle();
  qp.handles.push_back(h);
  qps_[qpn] = qp;
  qp_handles_[h] = {h, c, qpn, xh ? xh->handle : 0};
  PublishQp(qps_.at(qpn));
  *out = {h, qpn, cap, 0};
  return Verdict::Ok();
}

Verdict Device::OpenQp(ClientId c, const protocol::OpenQpRequest& req, protocol::OpenQpReply* out) {
  XrcdHandle* xh = FindOwned(xrcd_handles_, c, req.xrcd);
  if (!xh) return Verdict::Fail(EINVAL, "open_qp: no such XRC domain in this context");
  if (req.qp_type != IBV_QPT_XRC_RECV) {
    return Verdict::Fail(EINVAL, "open_qp: only XRC_RECV QPs can be opened");
  }
  auto it = qps_.find(req.qpn);
  if (it == qps_.end() || it->second.type != IBV_QPT_XRC_RECV || it->second.xrcd != xh->xrcd) {
    return Verdict::Fail(EINVAL, "open_qp: QP number " + std::to_string(req.qpn) +
                                     " is not an XRC receive QP of this domain");
  }
  Handle h = NextHandle();
  it->second.handles.push_back(h);
  qp_handles_[h] = {h, c, req.qpn, xh->handle};
  xh->users++;
  *out = {h, req.qpn, static_cast<uint32_t>(it->second.state), 0};
  return Verdict::Ok();
}

Verdict Device::QueryQp(ClientId c, Handle h, protocol::QueryQpReply* out) {
  QpHandle* qh = FindOwned(qp_handles_, c, h);
  if (!qh) return Verdict::Fail(EINVAL, "query_qp: no such QP in this context");
  const Qp& qp = qps_.at(qh->qpn);
  *out = {};
  out->attr = qp.attr;
  out->attr.qp_state = qp.state;
  out->attr.cur_qp_state = qp.state;
  out->attr.cap = qp.cap;
  out->attr.sq_draining = 0;
  out->init_cap = qp.cap;
  out->sq_sig_all = qp.sq_sig_all;
  out->qp_type = qp.type;
  return Verdict::Ok();
}

Verdict Device::DestroyQp(ClientId c, Handle h) {
  QpHandle* qh = FindOwned(qp_handles_, c, h);
  if (!qh) return Verdict::Fail(EINVAL, "destroy_qp: no such QP in this context");
  Qp& qp = qps_.at(qh->qpn);
  if (qp.in_ind_tables != 0) {
    return Verdict::Fail(EBUSY, "the receive work queue is in " + std::to_string(qp.in_ind_tables) +
                                    " indirection table(s); destroy them first");
  }
  if (qp.flows != 0) {
    return Verdict::Fail(
        EBUSY, "QP still has " + std::to_string(qp.flows) + " flow rule(s); destroy them first");
  }
  if (!qp.mcast_groups.empty()) {
    return Verdict::Fail(EBUSY, "QP is still attached to " +
                                    std::to_string(qp.mcast_groups.size()) +
                                    " multicast group(s); detach first");
  }
  DropQpHandle(h);
  return Verdict::Ok();
}

void Device::DropQpHandle(Handle h) {
  auto hit = qp_handles_.find(h);
  if (hit == qp_handles_.end()) return;
  uint32_t qpn = hit->second.qpn;
  ReleaseXrcdHandleUse(hit->second.xrcd_handle);
  qp_handles_.erase(hit);
  Qp& qp = qps_.at(qpn);
  std::erase(qp.handles, h);
  if (qp.handles.empty()) DestroyQpObject(qpn);
}

void Device::DestroyQpObject(uint32_t qpn) {
  Qp& qp = qps_.at(qpn);
  if (qp.pd) pds_[qp.pd].users--;
  if (qp.send_cq) cqs_[qp.send_cq].users--;
  if (qp.recv_cq) cqs_[qp.recv_cq].users--;
  if (qp.srq) srqs_[qp.srq].users--;
  if (qp.ind_table) ind_tables_.at(qp.ind_table).users--;
  Handle xrcd = qp.xrcd;
  UnpublishQp(qp);
  qps_.erase(qpn);
  if (xrcd) ReleaseXrcdUse(xrcd);
}

Verdict Device::AllocReservedQpn(ClientId c, protocol::ReservedQpn* out) {
  const uint32_t qpn = AllocateQpn();
  if (qpn == 0) return Verdict::Fail(ENOMEM, "reserved_qpn_alloc: no QP number left");
  reserved_qpns_[qpn] = c;
  *out = {qpn, 0};
  return Verdict::Ok();
}

Verdict Device::FreeReservedQpn(ClientId c, const protocol::ReservedQpn& req) {
  auto it = reserved_qpns_.find(req.qpn);
  if (it == reserved_qpns_.end() || it->second != c) {
    return Verdict::Fail(EINVAL, "reserved_qpn_dealloc: QP number 0x" + ToHex(req.qpn) +
                                     " is not reserved by this context");
  }
  reserved_qpns_.erase(it);
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
