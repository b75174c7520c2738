#include "datapath/local_ops.h"

#include "common/device_limits.h"
#include "datapath/keyed_access.h"
#include "datapath/sig_access.h"

namespace softverbs::datapath {
namespace {

// mlx5's DMA memcpy: both ranges are the QP's PD's, by lkey, the
// destination locally writable (what mlx5 checks of its MMO WQE's two data
// segments: a key of another PD or without local write is a local
// protection error). The bytes are copied as the device's DMA engine moves
// them: no order between the two ranges' bytes is promised, so overlapping
// ranges get undefined contents, as on the device.
VendorError Memcpy(Host& host, const LocalQp& qp, uint32_t owner, const SendWr& wr,
                   ibv_wc_status* status, uint32_t* byte_len) {
  // The builder makes one source of 1..kMaxWrMemcpyLength bytes; the
  // device checks again what reaches it through a doorbell ring.
  if (wr.num_sge != 1 || wr.sge[0].length == 0 || wr.sge[0].length > limits::kMaxWrMemcpyLength) {
    *status = IBV_WC_LOC_LEN_ERR;
    return kVendorMessageTooLong;
  }
  *status = IBV_WC_LOC_PROT_ERR;
  const RecvSge dest{wr.memcpy_dest_addr, wr.sge[0].length, wr.memcpy_dest_lkey};
  MrGuards guards;
  PieceList src;
  PieceList dst;
  const RequesterSigScope own;
  if (VendorError why =
          AddKeyedPieces(host, guards, &wr.sge[0], 1, false, qp.pdn, owner, 0, &src)) {
    return why;
  }
  if (VendorError why = AddKeyedPieces(host, guards, &dest, 1, false, qp.pdn, owner,
                                       IBV_ACCESS_LOCAL_WRITE, &dst)) {
    return why;
  }
  if (!CopyPieces(dst, src)) return kVendorLocalCopy;
  *byte_len = wr.sge[0].length;
  return kVendorNone;
}

}  // namespace

VendorError RunLocalOperation(Host& host, const LocalQp& qp, uint32_t owner, const SendWr& wr,
                              ibv_wc_status* status, uint32_t* byte_len) {
  *byte_len = 0;
  switch (WrOpcode(wr.opcode).local_op) {
    case LocalOp::kBindWindow:
      *status = IBV_WC_MW_BIND_ERR;
      return host.BindWindow(qp, wr);
    case LocalOp::kInvalidate:
      *status = IBV_WC_LOC_QP_OP_ERR;
      return host.InvalidateWindow(qp.qpn, wr.imm_data, false) ? kVendorNone : kVendorInvalidate;
    case LocalOp::kMemcpy:
      return Memcpy(host, qp, owner, wr, status, byte_len);
    case LocalOp::kConfigureMkey:
      // mlx5 reports a refused UMR as a memory-window bind error (its UMR
      // and BIND_MW are one WQE).
      *status = IBV_WC_MW_BIND_ERR;
      return host.ConfigureMkey(qp, wr);
    case LocalOp::kNone:
      break;
  }
  *status = IBV_WC_LOC_QP_OP_ERR;  // not a local operation: cannot be posted
  return kVendorNotOnTheWire;
}

}  // namespace softverbs::datapath
