// DEVX queues in the device's object model (docs/devx.md, "Data path"). A CQ
// or QP created through DEVX lives in the firmware (its PRM context); for the
// data path the device also keeps a shadow of it in the verbs tables:
//   - a CQ: a CQ ring (memfd) that every producer - the owner's DEVX queue
//     engine for its sends, any peer for receives - pushes completions into,
//     and that the engine turns into mlx5 CQEs in the CQ's UMEM;
//   - a QP: a receive queue (memfd) that the engine fills from the mlx5 RQ
//     and peers claim from, and an entry in the device table (state, PD,
//     access, remote QPN), so a verbs QP of another process reaches a DEVX
//     QP exactly as it reaches any QP.
// No verbs handle names a shadow: verbs calls cannot reach it.
#include <errno.h>
#include <unistd.h>

#include <algorithm>

#include "common/log.h"
#include "daemon/device.h"
#include "devx/prm_context_layouts.h"

namespace softverbs::daemon {
namespace {

namespace qpc = devx::layout::qpc;
namespace cqc = devx::layout::cqc;
namespace prm_state = devx::layout::qp_state;
using devx::GetField;

// qpc.state -> ibv_qp_state.
ibv_qp_state VerbsStateOf(uint32_t prm) {
  switch (prm) {
    case prm_state::kInit:
      return IBV_QPS_INIT;
    case prm_state::kRtr:
      return IBV_QPS_RTR;
    case prm_state::kRts:
      return IBV_QPS_RTS;
    case prm_state::kSqer:
      return IBV_QPS_SQE;
    case prm_state::kErr:
      return IBV_QPS_ERR;
    case prm_state::kSqd:
      return IBV_QPS_SQD;
    default:
      return IBV_QPS_RESET;
  }
}

// Receive scatter entries of one RQ WQE of 16 << log_rq_stride bytes (a
// data segment is 16 bytes), within the device's limit.
uint32_t RecvSgesOf(uint32_t log_rq_stride) {
  return std::min<uint32_t>(1u << log_rq_stride, limits::kMaxSge);
}

}  // namespace

void Device::DevxCqCreated(ClientId c, uint32_t cqn, std::span<const uint8_t> cqc_box) {
  const uint32_t entries = 1u << GetField(cqc_box, cqc::kLogCqSize);
  Cq cq{NextHandle(), c, cqn, entries, 0};
  cq.devx = true;
  cq.ring_fd = MakeCqFile(std::min<uint32_t>(entries, limits::kMaxCqe), cqn);
  if (cq.ring_fd < 0) {
    Log("devx: CQ 0x%x: no shadow ring (%d): its data path will not run", cqn, cq.ring_fd);
    return;
  }
  cqs_[cq.handle] = cq;
}

void Device::DevxQpCreated(ClientId c, uint32_t qpn, std::span<const uint8_t> qpc_box) {
  auto cq_handle = [&](uint32_t cqn) -> Handle {
    for (const auto& [h, cq] : cqs_) {
      if (cq.cqn == cqn && cq.owner == c) return h;
    }
    return 0;
  };
  Qp qp{};
  qp.qpn = qpn;
  qp.creator = c;
  switch (GetField(qpc_box, qpc::kSt)) {
    case devx::layout::qp_st::kUc:
      qp.type = IBV_QPT_UC;
      break;
    case devx::layout::qp_st::kUd:
      qp.type = IBV_QPT_UD;
      break;
    default:
      qp.type = IBV_QPT_RC;
  }
  qp.devx = true;
  qp.devx_pdn = GetField(qpc_box, qpc::kPd);
  qp.send_cq = cq_handle(GetField(qpc_box, qpc::kCqnSnd));
  qp.recv_cq = cq_handle(GetField(qpc_box, qpc::kCqnRcv));
  const bool has_rq = GetField(qpc_box, qpc::kRqType) == 0;
  const uint32_t rq_wqes = has_rq ? 1u << GetField(qpc_box, qpc::kLogRqSize) : 0;
  const uint32_t rq_sges = RecvSgesOf(GetField(qpc_box, qpc::kLogRqStride));
  qp.cap.max_recv_wr = rq_wqes;
  qp.cap.max_recv_sge = rq_sges;
  qp.rq_fd = MakeRecvQueueFile(rq_wqes, rq_sges);
  if (qp.rq_fd < 0) {
    Log("devx: QP 0x%x: no shadow receive queue (%d): its data path will not run", qpn, qp.rq_fd);
    return;
  }
  qps_[qpn] = qp;
  PublishQp(qps_[qpn]);
}

void Device::DevxQpModified(uint32_t qpn, std::span<const uint8_t> qpc_box) {
  auto it = qps_.find(qpn);
  if (it == qps_.end() || !it->second.devx) return;
  Qp& qp = it->second;
  const ibv_qp_state previous = qp.state;
  qp.state = VerbsStateOf(GetField(qpc_box, qpc::kState));
  ibv_qp_attr& a = qp.attr;
  a.qp_state = qp.state;
  a.dest_qp_num = GetField(qpc_box, qpc::kRemoteQpn);
  a.qp_access_flags = (GetField(qpc_box, qpc::kRre) ? IBV_ACCESS_REMOTE_READ : 0) |
                      (GetField(qpc_box, qpc::kRwe) ? IBV_ACCESS_REMOTE_WRITE : 0) |
                      (GetField(qpc_box, qpc::kRae) ? IBV_ACCESS_REMOTE_ATOMIC : 0);
  a.min_rnr_timer = static_cast<uint8_t>(GetField(qpc_box, qpc::kMinRnrNak));
  a.qkey = GetField(qpc_box, qpc::kQKey);
  if (uint32_t mtu = GetField(qpc_box, qpc::kMtu); mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096) {
    a.path_mtu = static_cast<ibv_mtu>(mtu);
  }
  PublishQpAttributes(qp);
  if (previous != IBV_QPS_ERR && qp.state == IBV_QPS_ERR) RaiseLastWqeReached(qp, previous);
}

void Device::DevxQueueDestroyed(ClientId c, bool is_qp, uint32_t number) {
  if (is_qp) {
    auto it = qps_.find(number);
    if (it == qps_.end() || !it->second.devx || it->second.creator != c) return;
    UnpublishQp(it->second);
    if (it->second.rq_fd >= 0) close(it->second.rq_fd);
    qps_.erase(it);
    return;
  }
  for (auto it = cqs_.begin(); it != cqs_.end(); ++it) {
    if (it->second.devx && it->second.cqn == number && it->second.owner == c) {
      if (it->second.ring_fd >= 0) close(it->second.ring_fd);
      cqs_.erase(it);
      return;
    }
  }
}

void Device::RemoveDevxQueues(ClientId c) {
  std::vector<uint32_t> qpns, cqns;
  for (const auto& [qpn, qp] : qps_) {
    if (qp.devx && qp.creator == c) qpns.push_back(qpn);
  }
  for (const auto& [h, cq] : cqs_) {
    if (cq.devx && cq.owner == c) cqns.push_back(cq.cqn);
  }
  for (uint32_t qpn : qpns) DevxQueueDestroyed(c, true, qpn);  // QPs before their CQs
  for (uint32_t cqn : cqns) DevxQueueDestroyed(c, false, cqn);
}

Verdict Device::DevxQueueFiles(ClientId c, const protocol::DevxQueueFilesRequest& req,
                               protocol::DevxQueueFilesReply* out, std::vector<int>* fds) {
  using protocol::DevxQueueKind;
  *out = {};
  auto ring_of = [&](Handle h) -> const Cq* {
    auto it = cqs_.find(h);
    return it == cqs_.end() || it->second.ring_fd < 0 ? nullptr : &it->second;
  };
  if (req.kind == static_cast<uint32_t>(DevxQueueKind::kCq)) {
    for (const auto& [h, cq] : cqs_) {
      if (cq.devx && cq.cqn == req.number && cq.owner == c) {
        fds->push_back(cq.ring_fd);
        out->send_cqn = out->recv_cqn = cq.cqn;
        return Verdict::Ok();
      }
    }
    return Verdict::Fail(
        ENOENT, "devx_queue_files: no DEVX CQ 0x" + ToHex(req.number) + " of this context");
  }
  if (req.kind != static_cast<uint32_t>(DevxQueueKind::kQp)) {
    return Verdict::Fail(EINVAL, "devx_queue_files: kind must be CQ (1) or QP (2)");
  }
  auto it = qps_.find(req.number);
  if (it == qps_.end() || !it->second.devx || it->second.creator != c) {
    return Verdict::Fail(
        ENOENT, "devx_queue_files: no DEVX QP 0x" + ToHex(req.number) + " of this context");
  }
  const Qp& qp = it->second;
  const Cq* send_cq = ring_of(qp.send_cq);
  const Cq* recv_cq = ring_of(qp.recv_cq);
  if (send_cq == nullptr || recv_cq == nullptr) {
    return Verdict::Fail(EINVAL, "devx_queue_files: QP 0x" + ToHex(req.number) +
                                     " has no send or receive CQ with a data path");
  }
  fds->push_back(qp.rq_fd);
  fds->push_back(send_cq->ring_fd);
  fds->push_back(recv_cq->ring_fd);
  *out = {send_cq->cqn, recv_cq->cqn};
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
