// Tag matching over the network transport (ibv_post_srq_ops(3)): a SEND that
// arrives for a QP on a tag-matching SRQ is matched against the SRQ's posted
// tags (the same list in shared memory the shared-memory responder matches,
// datapath/tag_matching.h) at its first packet. A matched eager message lands
// in the tag's buffer without its TMH; a matched rendezvous request is
// reported at once, and the device then reads the sender's buffer with an
// RDMA READ of this QP and tells the sender with a FIN SEND - two WRs of its
// own on the QP's send queue - before the data's completion; anything else
// takes an ordinary receive of the SRQ whole, as an unexpected message
// (IBV_WC_TM_RECV) or an untagged one (IBV_WC_TM_NO_TAG).
#include <infiniband/verbs.h>

#include <algorithm>

#include "datapath/keyed_access.h"
#include "datapath/tag_matching.h"
#include "datapath/wire_qp.h"

namespace softverbs::datapath {

bool WireQp::StartTaggedMessage(const WirePacket& packet) {
  const std::span<const uint8_t> payload = packet.payload;
  const Tmh tmh = payload.size() >= kTmhBytes ? DecodeTmh(payload.data()) : Tmh{};
  const bool tagged = payload.size() >= kTmhBytes &&
                      (tmh.opcode == IBV_TMH_EAGER ||
                       (tmh.opcode == IBV_TMH_RNDV && payload.size() >= kTmhBytes + kRvhBytes));
  TagList list(rx_->rq.header());
  TmTag tag;
  if (tagged && list.Match(tmh.tag, &tag)) {
    if (tmh.opcode == IBV_TMH_EAGER) {
      wqe_ = ClaimedRecv{};
      wqe_.wr_id = tag.recv_wr_id;
      wqe_.num_sge = tag.num_sge;
      wqe_.sge[0] = tag.sge;
      have_wqe_ = true;
      tm_ = {true,      true,    false,      IBV_WC_TM_RECV, IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID,
             kTmhBytes, tmh.tag, tmh.app_ctx};
      return true;
    }
    // Rendezvous: the match is reported now, the data once it is read.
    const Rvh rvh = DecodeRvh(payload.data() + kTmhBytes);
    const RendezvousInfo info{tag.recv_wr_id, tmh.tag, tmh.app_ctx, rvh.len};
    Completion c = RendezvousCompletion(info);
    c.wc_flags = IBV_WC_TM_MATCH;
    c.tm_tag = tmh.tag;
    c.tm_priv = tmh.app_ctx;
    Complete(rx_->recv_cq, rx_->cq_event_fd, c);
    const uint32_t room = tag.num_sge ? tag.sge.length : 0;
    if (rvh.len > room) {
      // The tag's buffer cannot take it: no read (IBV_WC_TM_RNDV_INCOMPLETE).
      FinishInternal(Internal::kRendezvousRead, info, IBV_WC_TM_RNDV_INCOMPLETE);
    } else {
      SendWr read{};
      read.opcode = IBV_WR_RDMA_READ;
      read.num_sge = rvh.len ? 1 : 0;
      read.sge[0] = {tag.sge.addr, rvh.len, tag.sge.lkey};
      read.remote_addr = rvh.va;
      read.rkey = rvh.rkey;
      QueueInternal(read, Internal::kRendezvousRead, info);
      // Sent once the request's ACK is (OnRequest): the sender's SEND
      // completes before it answers the read.
      pump_after_request_ = true;
    }
    tm_ = {true, true, true, 0, 0, 0, tmh.tag, tmh.app_ctx};
    return true;
  }
  // Unexpected (no tag matched, or matching waits for software to sync) or
  // untagged: an ordinary receive of the SRQ, header and all.
  if (!ClaimWqe()) return false;
  if (tagged) list.CountUnexpected();
  tm_ = {true, false, false, static_cast<uint8_t>(tagged ? IBV_WC_TM_RECV : IBV_WC_TM_NO_TAG),
         0,    0,     0,     0};
  return true;
}

void WireQp::QueueInternal(const SendWr& wr, Internal kind, const RendezvousInfo& rendezvous) {
  Pending& p = Enqueue(wr);
  p.wr.held = false;  // the device's own: not held by SQD
  p.internal = kind;
  p.rendezvous = rendezvous;
  Number(p);
}

Completion WireQp::RendezvousCompletion(const RendezvousInfo& info) const {
  Completion c{};
  c.wr_id = info.recv_wr_id;
  c.status = IBV_WC_SUCCESS;
  c.opcode = IBV_WC_TM_RECV;
  c.byte_len = info.len;
  c.qp_num = config_.qpn;
  c.src_qp = config_.dest_qpn;
  c.sl = config_.sl;
  return c;
}

void WireQp::FinishInternal(Internal kind, const RendezvousInfo& info, ibv_wc_status status) {
  if (kind != Internal::kRendezvousRead) return;  // a FIN: nothing follows it
  const bool read = status == IBV_WC_SUCCESS;
  if (read) {
    // The FIN: a 16-byte SEND of this QP telling the sender its buffer was
    // read (it takes one of the sender's receives).
    SendWr fin{};
    fin.opcode = IBV_WR_SEND;
    fin.send_flags = IBV_SEND_INLINE;
    EncodeTmh({IBV_TMH_FIN, info.app_ctx, info.tag}, fin.inline_data);
    fin.inline_len = kTmhBytes;
    QueueInternal(fin, Internal::kRendezvousFin, info);
  }
  PeerQp* rx = host_.FindPeerQp(config_.qpn, config_.generation);
  if (!rx) return;
  Completion c = RendezvousCompletion(info);
  c.status = read ? IBV_WC_SUCCESS : IBV_WC_TM_RNDV_INCOMPLETE;
  c.wc_flags = read ? IBV_WC_TM_DATA_VALID : 0;
  Complete(rx->recv_cq, rx->cq_event_fd, c);
}

}  // namespace softverbs::datapath
