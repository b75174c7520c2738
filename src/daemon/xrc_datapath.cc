// The daemon's part of XRC on the data path (docs/xrc.md): initiators reach
// an XRC SRQ by its number (map_srq), check that it still exists through the
// number published in its ring header, and ask for the affiliated events of
// a shared receive QP, which reach every handle of it (qp_event).
#include <errno.h>

#include "daemon/device.h"
#include "datapath/layout.h"
#include "datapath/shm.h"

namespace softverbs::daemon {

namespace dp = softverbs::datapath;

namespace {

// Stores srqn into the header of an SRQ's ring file.
void StoreRingSrqn(int ring_fd, uint32_t srqn) {
  if (ring_fd < 0) return;
  size_t size = 0;
  void* base = dp::MapSharedFile(ring_fd, &size);
  if (!base) return;
  static_cast<dp::RecvQueueHeader*>(base)->srqn.store(srqn, std::memory_order_seq_cst);
  dp::UnmapSharedFile(base, size);
}

bool IsResponderEvent(uint32_t type) {
  return type == IBV_EVENT_COMM_EST || type == IBV_EVENT_QP_ACCESS_ERR ||
         type == IBV_EVENT_QP_REQ_ERR || type == IBV_EVENT_SQ_DRAINED;
}

}  // namespace

void Device::PublishSrqNumber(const Srq& srq) {
  StoreRingSrqn(srq.ring_fd, srq.srqn);
}

void Device::UnpublishSrqNumber(const Srq& srq) {
  // Cleared before the SRQ goes: an initiator that cached the ring sees 0
  // and asks again (and learns that the number is gone).
  StoreRingSrqn(srq.ring_fd, 0);
}

Verdict Device::MapSrq(ClientId c, uint32_t srqn, protocol::MapSrqReply* out,
                       std::vector<int>* fds) {
  (void)c;  // XRC senders are by nature other processes than the SRQ's owner
  for (const auto& [h, srq] : srqs_) {
    if (srq.srqn != srqn || srq.type != IBV_SRQT_XRC) continue;
    auto cq = cqs_.find(srq.cq);
    if (srq.ring_fd < 0 || cq == cqs_.end() || cq->second.ring_fd < 0) break;
    fds->push_back(srq.ring_fd);
    fds->push_back(cq->second.ring_fd);
    if (cq->second.event_fd >= 0) fds->push_back(cq->second.event_fd);
    auto pd = pds_.find(srq.pd);
    *out = {srqn,
            srq.owner,
            srq.xrcd,
            pd == pds_.end() ? 0 : pd->second.pdn,
            cq->second.event_fd >= 0 ? 1u : 0u,
            0};
    return Verdict::Ok();
  }
  return Verdict::Fail(ENOENT, "map_srq: no XRC SRQ " + std::to_string(srqn));
}

Verdict Device::RaiseQpEvent(ClientId c, uint32_t qpn, uint32_t event_type) {
  (void)c;
  if (!IsResponderEvent(event_type)) {
    return Verdict::Fail(EINVAL, "qp_event: event " + std::to_string(event_type) +
                                     " is not raised by the data path");
  }
  auto it = qps_.find(qpn);
  if (it == qps_.end()) return Verdict::Fail(ENOENT, "qp_event: no QP 0x" + ToHex(qpn));
  // Every handle: the creator's and each ibv_open_qp / legacy registration
  // (the kernel fans target-QP events out the same way).
  for (Handle h : it->second.handles) {
    PostEvent(qp_handles_.at(h).owner, static_cast<ibv_event_type>(event_type),
              protocol::EventElement::kQp, h, qpn);
  }
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
