#include "datapath/mlx5_wqe.h"

#include <endian.h>
#include <string.h>

#include <algorithm>
#include <iterator>

#include "datapath/mkey_layout.h"

namespace softverbs::datapath::mlx5 {
namespace {

// The send opcodes this device executes (PRM "Send WQE opcodes"); MMO with
// the DMA engine only (kOpcModMmoDma); UMR for indirect memory keys and
// their invalidation (LOCAL_INV is a UMR WQE on mlx5; ParseUmr). Masked
// atomics, LSO, TAG_MATCHING and the rest are not in the table: their WQEs
// complete with LOCAL_QP_OP_ERR, as on a device without them.
constexpr SendOpcodeInfo kSendOpcodes[] = {
    // opcode                    name              nop    wr_opcode                raddr  atomic
    // gather
    {MLX5_OPCODE_NOP, "NOP", true, 0, false, false, false},
    {MLX5_OPCODE_RDMA_WRITE, "RDMA_WRITE", false, IBV_WR_RDMA_WRITE, true, false, true},
    {MLX5_OPCODE_RDMA_WRITE_IMM, "RDMA_WRITE_IMM", false, IBV_WR_RDMA_WRITE_WITH_IMM, true, false,
     true},
    {MLX5_OPCODE_SEND, "SEND", false, IBV_WR_SEND, false, false, true},
    {MLX5_OPCODE_SEND_IMM, "SEND_IMM", false, IBV_WR_SEND_WITH_IMM, false, false, true},
    {MLX5_OPCODE_SEND_INVAL, "SEND_INVAL", false, IBV_WR_SEND_WITH_INV, false, false, true},
    {MLX5_OPCODE_RDMA_READ, "RDMA_READ", false, IBV_WR_RDMA_READ, true, false, true},
    {MLX5_OPCODE_ATOMIC_CS, "ATOMIC_CS", false, IBV_WR_ATOMIC_CMP_AND_SWP, true, true, true},
    {MLX5_OPCODE_ATOMIC_FA, "ATOMIC_FA", false, IBV_WR_ATOMIC_FETCH_AND_ADD, true, true, true},
    {MLX5_OPCODE_MMO, "MMO_DMA", false, kWrMlx5Memcpy, false, false, false, true},
    {MLX5_OPCODE_UMR, "UMR", false, kWrMlx5Umr, false, false, false, false, true},
};

// The mkey context's access flags as ibv_access_flags.
struct UmrAccessRow {
  uint8_t context_bit;  // MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_*
  uint32_t access;      // IBV_ACCESS_*
};
constexpr UmrAccessRow kUmrAccess[] = {
    {MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE, IBV_ACCESS_LOCAL_WRITE},
    {MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ, IBV_ACCESS_REMOTE_READ},
    {MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE, IBV_ACCESS_REMOTE_WRITE},
    {MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC, IBV_ACCESS_REMOTE_ATOMIC},
};
constexpr uint64_t kUmrAccessMask = MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE |
                                    MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ |
                                    MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE |
                                    MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC;

// Work-completion status -> CQE syndrome (PRM "CQE error syndromes").
struct SyndromeRow {
  uint32_t status;  // ibv_wc_status
  uint8_t syndrome;
};
constexpr SyndromeRow kSyndromes[] = {
    {IBV_WC_LOC_LEN_ERR, MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR},
    {IBV_WC_LOC_QP_OP_ERR, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR},
    {IBV_WC_LOC_PROT_ERR, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR},
    {IBV_WC_WR_FLUSH_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR},
    {IBV_WC_MW_BIND_ERR, MLX5_CQE_SYNDROME_MW_BIND_ERR},
    {IBV_WC_BAD_RESP_ERR, MLX5_CQE_SYNDROME_BAD_RESP_ERR},
    {IBV_WC_LOC_ACCESS_ERR, MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR},
    {IBV_WC_REM_INV_REQ_ERR, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR},
    {IBV_WC_REM_ACCESS_ERR, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR},
    {IBV_WC_REM_OP_ERR, MLX5_CQE_SYNDROME_REMOTE_OP_ERR},
    {IBV_WC_RETRY_EXC_ERR, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR},
    {IBV_WC_RNR_RETRY_EXC_ERR, MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR},
    {IBV_WC_REM_ABORT_ERR, MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR},
};

// Copies `len` bytes of a ring of `ring_bytes` starting at `offset`,
// wrapping to the start.
void CopyFromRing(const uint8_t* ring, uint32_t ring_bytes, uint32_t offset, uint32_t len,
                  uint8_t* out) {
  const uint32_t first = std::min(len, ring_bytes - offset);
  memcpy(out, ring + offset, first);
  memcpy(out + first, ring, len - first);
}

template <typename Seg>
Seg ReadSeg(const uint8_t* wqe, uint32_t offset) {
  Seg seg;
  memcpy(&seg, wqe + offset, sizeof(seg));
  return seg;
}

// A UMR WQE after its control segment (`offset`), as libmlx5's memory-key
// and LOCAL_INV builders write it: the UMR control segment, the memory key
// context, then the translation inline - KLMs, or a repeat block and its
// entries. The key is the control segment's immediate. A FREE mask with
// the context's free bit is an invalidation (IBV_WR_LOCAL_INV of the key);
// anything else gives the key what the mask names - access, length and
// layout - as kWrMlx5Umr (datapath/mkey_layout.h), with the context's new
// key tag (qpn_mkey's low byte) in rkey: a UMR of a memory window's key is
// libmlx5's bind (one KLM: the MR, the range, the window's access), which
// the device applies as a bind.
WqeError ParseUmr(const uint8_t* wqe, uint32_t bytes, uint32_t offset, uint32_t key, SendWr* wr) {
  if (offset + sizeof(mlx5_wqe_umr_ctrl_seg) + sizeof(mlx5_wqe_mkey_context_seg) > bytes) {
    return WqeError::kUmrSegments;
  }
  const auto umr = ReadSeg<mlx5_wqe_umr_ctrl_seg>(wqe, offset);
  const auto mkc = ReadSeg<mlx5_wqe_mkey_context_seg>(wqe, offset + sizeof(umr));
  offset += sizeof(umr) + sizeof(mkc);
  const uint64_t mask = be64toh(umr.mkey_mask);
  wr->imm_data = key;
  if ((mask & MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE) && (mkc.free & MLX5_WQE_MKEY_CONTEXT_FREE)) {
    wr->opcode = IBV_WR_LOCAL_INV;
    return WqeError::kNone;
  }
  wr->compare_add = 1;
  wr->rkey = be32toh(mkc.qpn_mkey) & 0xff;
  if (mask & kUmrAccessMask) {
    for (const UmrAccessRow& row : kUmrAccess) {
      if (mkc.access_flags & row.context_bit) wr->bind_access |= row.access;
    }
    wr->swap |= kUmrSetsAccess;
  }
  if (!(mask & MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN)) return WqeError::kNone;
  wr->swap |= kUmrSetsLayout;
  const uint32_t xlt_bytes = be16toh(umr.klm_octowords) * kSegBytes;
  if (xlt_bytes == 0) return WqeError::kNone;  // an empty layout
  if (!(umr.flags & MLX5_WQE_UMR_CTRL_FLAG_INLINE) || offset + xlt_bytes > bytes) {
    return WqeError::kUmrSegments;
  }
  UmrEntry entries[limits::kMaxMkeyEntries] = {};
  uint32_t n = 0;
  const auto block = ReadSeg<mlx5_wqe_umr_repeat_block_seg>(wqe, offset);
  if (be32toh(block.op) == kUmrRepeatBlockOp) {
    n = be16toh(block.num_ent);
    if (n > limits::kMaxMkeyEntries || (n + 1) * kSegBytes > xlt_bytes) {
      return WqeError::kUmrSegments;
    }
    for (uint32_t i = 0; i < n; ++i) {
      const auto e = ReadSeg<mlx5_wqe_umr_repeat_ent_seg>(wqe, offset + (i + 1) * kSegBytes);
      entries[i] = {be64toh(e.va), be32toh(e.memkey), be16toh(e.byte_count), be16toh(e.stride), 0};
    }
    wr->compare_add = be32toh(block.repeat_count);
  } else {
    // KLMs up to the translation's end, less the zeroed ones that pad it
    // to 64 bytes.
    uint32_t last = 0;
    for (uint32_t i = 0; i * kSegBytes < xlt_bytes; ++i) {
      const auto klm = ReadSeg<mlx5_wqe_umr_klm_seg>(wqe, offset + i * kSegBytes);
      if (klm.byte_count == 0 && klm.mkey == 0 && klm.address == 0) continue;
      if (i >= limits::kMaxMkeyEntries) return WqeError::kUmrSegments;
      const uint32_t count = be32toh(klm.byte_count);
      entries[i] = {be64toh(klm.address), be32toh(klm.mkey), count, count, 0};
      last = i + 1;
    }
    n = last;
  }
  memcpy(wr->inline_data, entries, n * sizeof(UmrEntry));
  wr->inline_len = n * sizeof(UmrEntry);
  return WqeError::kNone;
}

}  // namespace

const SendOpcodeInfo* FindSendOpcode(uint8_t opcode) {
  for (const SendOpcodeInfo& info : kSendOpcodes) {
    if (info.opcode == opcode) return &info;
  }
  return nullptr;
}

const char* WqeErrorName(WqeError error) {
  switch (error) {
    case WqeError::kNone:
      return "none";
    case WqeError::kUnknownOpcode:
      return "opcode not supported by this device";
    case WqeError::kBadDs:
      return "ds (WQE size in 16-byte units) does not fit the opcode's segments or the ring";
    case WqeError::kQpnMismatch:
      return "the control segment names another QP";
    case WqeError::kTooManySges:
      return "more data segments than max_sge";
    case WqeError::kInlineTooLong:
      return "inline data longer than max_inline_data";
    case WqeError::kInlineOverrun:
      return "inline byte count runs past the WQE";
    case WqeError::kInlineAfterData:
      return "an inline segment after a data segment";
    case WqeError::kBadAddress:
      return "the address vector's source GID index is past the GID table";
    case WqeError::kOffHost:
      return "the address vector leads off this host (the DEVX data path runs on one host)";
    case WqeError::kAtomicSge:
      return "an atomic needs exactly one 8-byte data segment";
    case WqeError::kMmoSegments:
      return "a DMA MMO needs a metadata segment, then a source and a destination data segment "
             "of one length";
    case WqeError::kUmrSegments:
      return "a UMR needs its control and memory key context segments, and a translation of at "
             "most 8 inline KLMs or one repeat block";
  }
  return "unknown";
}

WqeError ParseSendWqe(const uint8_t* sq, uint32_t sq_basic_blocks, uint32_t wqebb, uint32_t qpn,
                      ParsedSendWqe* out, WqeAddress address) {
  const uint32_t ring_bytes = sq_basic_blocks * kSendWqeBb;
  const uint32_t start = (wqebb & (sq_basic_blocks - 1)) * kSendWqeBb;
  // The control segment first; it says how long the WQE is.
  uint8_t wqe[kMaxWqeDs * kSegBytes];
  CopyFromRing(sq, ring_bytes, start, kSegBytes, wqe);
  const auto ctrl = ReadSeg<mlx5_wqe_ctrl_seg>(wqe, 0);
  const uint32_t opmod_idx_opcode = be32toh(ctrl.opmod_idx_opcode);
  const uint32_t qpn_ds = be32toh(ctrl.qpn_ds);
  *out = ParsedSendWqe{};
  out->opcode = static_cast<uint8_t>(opmod_idx_opcode & 0xff);
  out->wqe_index = static_cast<uint16_t>(opmod_idx_opcode >> 8);
  out->fm_ce_se = ctrl.fm_ce_se;
  const uint32_t ds = qpn_ds & kMaxWqeDs;
  const uint32_t bytes = ds * kSegBytes;
  out->basic_blocks = std::max<uint32_t>(1, (bytes + kSendWqeBb - 1) / kSendWqeBb);
  if ((qpn_ds >> 8) != qpn) return WqeError::kQpnMismatch;
  if (ds == 0 || bytes > ring_bytes) return WqeError::kBadDs;
  out->info = FindSendOpcode(out->opcode);
  if (out->info == nullptr) return WqeError::kUnknownOpcode;
  CopyFromRing(sq, ring_bytes, start, bytes, wqe);

  const SendOpcodeInfo& info = *out->info;
  SendWr& wr = out->wr;
  wr.wr_id = RequesterWrId(out->opcode, out->wqe_index);
  wr.opcode = info.wr_opcode;
  if (ctrl.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) wr.send_flags |= IBV_SEND_SIGNALED;
  if (ctrl.fm_ce_se & MLX5_WQE_CTRL_SOLICITED) wr.send_flags |= IBV_SEND_SOLICITED;
  // The immediate, in network order on both sides; SEND_INVAL's rkey to
  // invalidate is big-endian in the WQE and host order in a SendWr (as in
  // ibv_send_wr's invalidate_rkey).
  wr.imm_data = info.wr_opcode == IBV_WR_SEND_WITH_INV ? be32toh(ctrl.imm) : ctrl.imm;
  uint32_t offset = kSegBytes;
  if (info.umr) return ParseUmr(wqe, bytes, offset, be32toh(ctrl.imm), &wr);
  if (info.dma_mmo) {
    // opmod: which MMO engine (DMA only); the metadata segment (an opaque
    // buffer of the PD for the engine's own use) is not read. Source and
    // destination by lkey, as mlx5dv_wr_memcpy builds them.
    if ((opmod_idx_opcode >> 24) != kOpcModMmoDma) return WqeError::kUnknownOpcode;
    if (bytes < offset + 3 * kSegBytes) return WqeError::kMmoSegments;
    const auto src = ReadSeg<mlx5_wqe_data_seg>(wqe, offset + kSegBytes);
    const auto dest = ReadSeg<mlx5_wqe_data_seg>(wqe, offset + 2 * kSegBytes);
    if (src.byte_count != dest.byte_count) return WqeError::kMmoSegments;
    wr.num_sge = 1;
    wr.sge[0] = {be64toh(src.addr), be32toh(src.byte_count), be32toh(src.lkey)};
    wr.memcpy_dest_addr = be64toh(dest.addr);
    wr.memcpy_dest_lkey = be32toh(dest.lkey);
    return WqeError::kNone;
  }
  if (address != WqeAddress::kConnected) {
    // The address vector (libmlx5's mlx5_wqe_av): destination QP (a DCT
    // for a DCI), Q_Key (a DCI: the DC access key), the GRH's destination
    // GID, traffic class, hop limit and source GID index (grh_gid_fl bits
    // 27:20).
    if (offset + sizeof(mlx5_wqe_datagram_seg) > bytes) return WqeError::kBadDs;
    const auto av = ReadSeg<mlx5_wqe_av>(wqe, offset);
    wr.remote_qpn = be32toh(av.dqp_dct) & 0xffffff;
    if (address == WqeAddress::kDc) {
      wr.dc_key = be64toh(av.key.dc_key);
      wr.dc_addr_set = true;
      wr.dci_stream = be16toh(ctrl.dci_stream_channel_id);
    } else {
      wr.remote_qkey = be32toh(av.key.qkey.qkey);
    }
    memcpy(wr.dgid, av.rgid, sizeof(wr.dgid));
    wr.path = {av.tclass, roce::HopLimitOnTheWire(av.hop_limit)};
    out->sgid_index = static_cast<uint8_t>(be32toh(av.grh_gid_fl) >> 20);
    offset += sizeof(mlx5_wqe_datagram_seg);
  }
  if (info.raddr) {
    if (offset + kSegBytes > bytes) return WqeError::kBadDs;
    const auto raddr = ReadSeg<mlx5_wqe_raddr_seg>(wqe, offset);
    wr.remote_addr = be64toh(raddr.raddr);
    wr.rkey = be32toh(raddr.rkey);
    offset += kSegBytes;
  }
  if (info.atomic) {
    if (offset + kSegBytes > bytes) return WqeError::kBadDs;
    const auto atomic = ReadSeg<mlx5_wqe_atomic_seg>(wqe, offset);
    if (info.wr_opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
      wr.compare_add = be64toh(atomic.compare);
      wr.swap = be64toh(atomic.swap_add);
    } else {
      wr.compare_add = be64toh(atomic.swap_add);
    }
    offset += kSegBytes;
  }
  if (!info.gather) return WqeError::kNone;
  // Inline segments (their bytes follow, padded to 16), then data
  // segments; an inline segment after a data segment is not read here.
  while (offset < bytes) {
    uint32_t word;
    memcpy(&word, wqe + offset, sizeof(word));
    const uint32_t byte_count = be32toh(word);
    if (byte_count & MLX5_INLINE_SEG) {
      if (wr.num_sge != 0) return WqeError::kInlineAfterData;
      const uint32_t len = byte_count & ~MLX5_INLINE_SEG;
      if (len > kMaxInline || wr.inline_len + len > kMaxInline) return WqeError::kInlineTooLong;
      if (offset + sizeof(mlx5_wqe_inl_data_seg) + len > bytes) return WqeError::kInlineOverrun;
      memcpy(wr.inline_data + wr.inline_len, wqe + offset + sizeof(mlx5_wqe_inl_data_seg), len);
      wr.inline_len += len;
      wr.send_flags |= IBV_SEND_INLINE;
      offset += (sizeof(mlx5_wqe_inl_data_seg) + len + kSegBytes - 1) / kSegBytes * kSegBytes;
      continue;
    }
    const auto data = ReadSeg<mlx5_wqe_data_seg>(wqe, offset);
    offset += kSegBytes;
    if (byte_count == 0 && be32toh(data.lkey) == kInvalidLkey) break;
    if (wr.num_sge == kMaxSendSge) return WqeError::kTooManySges;
    wr.sge[wr.num_sge++] = {be64toh(data.addr), byte_count, be32toh(data.lkey)};
  }
  if (info.atomic && (wr.num_sge != 1 || wr.sge[0].length != 8)) return WqeError::kAtomicSge;
  return WqeError::kNone;
}

WqeError ParseRecvWqe(const uint8_t* wqe, uint32_t stride, RecvSge* sge, uint32_t max_sge,
                      uint32_t* num) {
  *num = 0;
  for (uint32_t offset = 0; offset + kSegBytes <= stride; offset += kSegBytes) {
    const auto data = ReadSeg<mlx5_wqe_data_seg>(wqe, offset);
    if (be32toh(data.lkey) == kInvalidLkey) break;
    if (*num == max_sge) return WqeError::kTooManySges;
    sge[(*num)++] = {be64toh(data.addr), be32toh(data.byte_count), be32toh(data.lkey)};
  }
  return WqeError::kNone;
}

uint8_t SyndromeOf(uint32_t status) {
  for (const SyndromeRow& row : kSyndromes) {
    if (row.status == status) return row.syndrome;
  }
  return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
}

uint8_t BuildCqe(const Completion& c, uint32_t qpn, uint8_t* cqe) {
  // The vendor opcodes (a raw WQE's, a DMA MMO's) follow the receive ones
  // in ibv_wc_opcode but are the requester's.
  const bool requester =
      c.opcode < IBV_WC_RECV || (c.opcode >= IBV_WC_DRIVER1 && c.opcode <= IBV_WC_DRIVER3);
  const uint8_t wqe_opcode = requester ? static_cast<uint8_t>(c.wr_id >> 32) : 0;
  const auto wqe_counter = static_cast<uint16_t>(c.wr_id & 0xffff);
  memset(cqe, 0, kCqeBytes - 1);
  if (c.status != IBV_WC_SUCCESS) {
    mlx5_err_cqe err{};
    err.syndrome = SyndromeOf(c.status);
    err.vendor_err_synd = static_cast<uint8_t>(c.vendor_err);
    err.s_wqe_opcode_qpn = htobe32(uint32_t{wqe_opcode} << 24 | (qpn & 0xffffff));
    err.wqe_counter = htobe16(wqe_counter);
    memcpy(cqe, &err, offsetof(mlx5_err_cqe, op_own));
    return static_cast<uint8_t>((requester ? MLX5_CQE_REQ_ERR : MLX5_CQE_RESP_ERR) << 4);
  }
  mlx5_cqe64 ok{};
  ok.byte_cnt = htobe32(c.byte_len);
  ok.sop_drop_qpn = htobe32(uint32_t{wqe_opcode} << 24 | (qpn & 0xffffff));
  ok.wqe_counter = htobe16(wqe_counter);
  ok.timestamp = htobe64(c.timestamp);
  uint8_t opcode = MLX5_CQE_REQ;
  if (!requester) {
    // The source QP, the SL (for a UD message over RoCE, the packet type:
    // ud_receive.h) and, when a GRH was placed in the buffer, the "L3
    // header in data" flag (bit 28).
    ok.flags_rqpn = htobe32((c.wc_flags & IBV_WC_GRH ? 1u << 28 : 0) | uint32_t{c.sl & 0xfu} << 24 |
                            (c.src_qp & 0xffffff));
    ok.slid = 0;  // RoCE: no LID
    if (c.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV)) ok.imm_inval_pkey = c.imm_data;
    if (c.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      opcode = MLX5_CQE_RESP_WR_IMM;
    } else if (c.wc_flags & IBV_WC_WITH_IMM) {
      opcode = MLX5_CQE_RESP_SEND_IMM;
    } else if (c.wc_flags & IBV_WC_WITH_INV) {
      opcode = MLX5_CQE_RESP_SEND_INV;
    } else {
      opcode = MLX5_CQE_RESP_SEND;
    }
  }
  memcpy(cqe, &ok, offsetof(mlx5_cqe64, op_own));
  return static_cast<uint8_t>(opcode << 4);
}

}  // namespace softverbs::datapath::mlx5
