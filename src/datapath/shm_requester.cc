// The requester of the shared-memory engine (engine.h): one WR becomes one
// request to the responder (shm_responder.h). Local operations (BIND_MW,
// LOCAL_INV, mlx5's DMA memcpy: local_ops.h) run in the send queue's order; every
// other WR has its local keys checked and its bytes gathered (a READ's and
// an atomic's destination checked for local write) before the request
// goes, as a NIC reads its SGEs before it sends.
#include <string.h>

#include <vector>

#include "datapath/keyed_access.h"
#include "datapath/local_ops.h"
#include "datapath/shm_responder.h"
#include "datapath/sig_access.h"
#include "verbs/flow_rule.h"

namespace softverbs::datapath {

namespace {

// Source pieces of a SEND or WRITE: the inline bytes, then the local SGEs.
VendorError GatherSource(Host& host, MrGuards& guards, const LocalQp& qp, const SendWr& wr,
                         PieceList* src) {
  if (wr.send_flags & IBV_SEND_INLINE) {
    src->Add({const_cast<uint8_t*>(wr.inline_data), -1, 0, wr.inline_len});
    if (wr.num_sge == 0) return kVendorNone;
  }
  const RequesterSigScope own;
  return AddKeyedPieces(host, guards, wr.sge, wr.num_sge, false, qp.pdn, host.client_id(), 0, src);
}

// RDMA WRITE / READ / atomics: the requester's side, then the request.
void RequestRdma(Host& host, const LocalQp& qp, const SendWr& wr, const WrOpcodeInfo& info,
                 Outcome* out) {
  const bool is_read = info.action == WrAction::kRead;
  const bool is_atomic = info.action == WrAction::kAtomic;
  const uint32_t bytes = is_atomic ? 8 : WrBytes(wr);
  MrGuards guards;
  PieceList local;
  if (is_read || is_atomic) {
    if (is_atomic && (wr.num_sge != 1 || wr.sge[0].length < 8)) {
      return FailLocally(out, IBV_WC_LOC_LEN_ERR, kVendorMessageTooLong);
    }
    RecvSge sge[kMaxSendSge];
    memcpy(sge, wr.sge, wr.num_sge * sizeof(RecvSge));
    if (is_atomic) sge[0].length = 8;
    const RequesterSigScope own;
    if (VendorError why = AddKeyedPieces(host, guards, sge, wr.num_sge, false, qp.pdn,
                                         host.client_id(), IBV_ACCESS_LOCAL_WRITE, &local)) {
      return FailLocally(out, IBV_WC_LOC_PROT_ERR, why);
    }
  } else if (VendorError why = GatherSource(host, guards, qp, wr, &local)) {
    return FailLocally(out, IBV_WC_LOC_PROT_ERR, why);
  }
  out->completion.byte_len = bytes;
  RespondToRdma(host, qp, wr, info, local, bytes, out);
}

// A raw packet QP's frame goes to every raw packet QP the device's flow
// rules steer it to, a copy each (docs/raw_packet.md); to none when no rule
// matches, as a frame sent to a wire nobody listens on. Either way the
// sender's completion says it was sent: a receiver without a posted WQE
// drops its copy, as a NIC's receive queue does.
void SendRawFrame(Host& host, const LocalQp& qp, const SendWr& wr, const WrOpcodeInfo& info,
                  const PieceList& src, uint32_t bytes, Outcome* out) {
  if (bytes > limits::kMaxRawFrameBytes) {
    return FailLocally(out, IBV_WC_LOC_LEN_ERR, kVendorMessageTooLong);
  }
  uint8_t head[verbs::kFlowHeadBytes];
  PieceList head_dst;
  head_dst.Add({head, -1, 0, sizeof(head)});
  if (!CopyPieces(head_dst, src)) return FailLocally(out, IBV_WC_LOC_PROT_ERR, kVendorBadLkey);
  const uint32_t head_bytes = bytes < sizeof(head) ? bytes : sizeof(head);
  std::vector<uint32_t> targets;
  host.FlowTargets(qp.qpn, head, head_bytes, &targets);
  out->response = Response::kDropped;
  for (uint32_t t : targets) RespondToSend(host, qp, wr, info, src, bytes, t, out);
}

}  // namespace

Outcome Execute(Host& host, const LocalQp& qp, const SendWr& wr) {
  ExecutionScope scope(host);
  Outcome out;
  Completion& c = out.completion;
  c.wr_id = wr.wr_id;
  c.status = IBV_WC_SUCCESS;
  const WrOpcodeInfo& info = WrOpcode(wr.opcode);
  c.opcode = RequesterWcOpcode(wr);
  c.qp_num = qp.qpn;
  if (info.action == WrAction::kLocal) {
    // No request: the device's own work, in the send queue's order.
    ibv_wc_status status;
    if (VendorError why = RunLocalOperation(host, qp, host.client_id(), wr, &status, &c.byte_len)) {
      FailLocally(&out, status, why);
    }
    return out;
  }
  if (info.action != WrAction::kSend) {
    RequestRdma(host, qp, wr, info, &out);
    return out;
  }
  const uint32_t bytes = WrBytes(wr);
  c.byte_len = bytes;
  MrGuards guards;
  PieceList src;
  if (VendorError why = GatherSource(host, guards, qp, wr, &src)) {
    FailLocally(&out, IBV_WC_LOC_PROT_ERR, why);
    return out;
  }
  if (qp.type == IBV_QPT_RAW_PACKET) {
    SendRawFrame(host, qp, wr, info, src, bytes, &out);
    return out;
  }
  if (qp.type != IBV_QPT_UD) {
    RespondToSend(host, qp, wr, info, src, bytes, ConnectedTargetOf(qp, wr), &out);
    return out;
  }
  if (bytes > qp.mtu_bytes) {
    FailLocally(&out, IBV_WC_LOC_LEN_ERR, kVendorMessageTooLong);
    return out;
  }
  if (wr.remote_qpn != 0xffffff) {
    RespondToSend(host, qp, wr, info, src, bytes, wr.remote_qpn, &out);
    return out;
  }
  // A multicast group: every member attached on this host gets a copy.
  std::vector<uint32_t> members;
  host.McastMembers(wr.dgid, &members);
  for (uint32_t m : members) RespondToSend(host, qp, wr, info, src, bytes, m, &out);
  return out;
}

}  // namespace softverbs::datapath
