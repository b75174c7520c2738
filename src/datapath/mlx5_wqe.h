// mlx5 work queue entries and completion queue entries, as a ConnectX reads
// and writes them in the buffers of DEVX queues (the PRM's send/receive WQE
// and CQE formats). The layouts are rdma-core's own (<infiniband/mlx5dv.h>,
// big-endian fields); this file holds the facts about them: which segments
// each send opcode carries (kSendOpcodes), how a work-completion status maps
// to a CQE syndrome (kSyndromes), and the parsers that turn WQEs into the
// engine's SendWr / receive SGEs and completions into CQEs. Parsers never
// trust the buffer: a malformed WQE is a named WqeError, which the device
// completes with the syndrome hardware gives (LOCAL_QP_OP_ERR), never a
// crash. docs/devx.md "Data path" describes the whole DEVX queue model.
#pragma once

#include <infiniband/mlx5dv.h>

#include <cstddef>
#include <cstdint>

#include "datapath/engine.h"
#include "datapath/layout.h"

namespace softverbs::datapath::mlx5 {

// Fixed sizes of the PRM formats (static_assert: mlx5dv.h is the reference).
inline constexpr uint32_t kSendWqeBb = 64;       // MLX5_SEND_WQE_BB: one send basic block
inline constexpr uint32_t kSegBytes = 16;        // every WQE segment is a multiple of 16 bytes
inline constexpr uint32_t kMaxWqeDs = 0x3f;      // qpn_ds holds 6 bits of 16-byte units
inline constexpr uint32_t kCqeBytes = 64;        // 64-byte CQEs (cqe_sz 0)
inline constexpr uint32_t kInvalidLkey = 0x100;  // MLX5_INVALID_LKEY ends a receive WQE
// The MMO opcode's modifier for a DMA copy (libmlx5's MLX5_OPC_MOD_MMO_DMA,
// bits 31:24 of opmod_idx_opcode); other MMO engines are not here.
inline constexpr uint8_t kOpcModMmoDma = 0x1;
static_assert(sizeof(mlx5_wqe_ctrl_seg) == kSegBytes);
static_assert(sizeof(mlx5_wqe_raddr_seg) == kSegBytes);
static_assert(sizeof(mlx5_wqe_atomic_seg) == kSegBytes);
static_assert(sizeof(mlx5_wqe_data_seg) == kSegBytes);
static_assert(sizeof(mlx5_wqe_inl_data_seg) == 4);
static_assert(sizeof(mlx5_wqe_datagram_seg) == 3 * kSegBytes);
static_assert(sizeof(mlx5_cqe64) == kCqeBytes);
static_assert(sizeof(mlx5_err_cqe) == kCqeBytes);
static_assert(sizeof(mlx5_wqe_umr_ctrl_seg) == 3 * kSegBytes);
static_assert(sizeof(mlx5_wqe_mkey_context_seg) == 4 * kSegBytes);
static_assert(sizeof(mlx5_wqe_umr_klm_seg) == kSegBytes);
static_assert(sizeof(mlx5_wqe_umr_repeat_block_seg) == kSegBytes);
static_assert(sizeof(mlx5_wqe_umr_repeat_ent_seg) == kSegBytes);
// A UMR's translation is a repeat block when its second word is this
// (libmlx5's umr_strided_seg_create), KLMs otherwise.
inline constexpr uint32_t kUmrRepeatBlockOp = 0x400;
static_assert(offsetof(mlx5_cqe64, op_own) == 63 && offsetof(mlx5_err_cqe, syndrome) == 55);

// The doorbell record of a QP: two big-endian counters (MLX5_RCV_DBR,
// MLX5_SND_DBR); of a CQ: the consumer index (MLX5_CQ_SET_CI, 24 bits).
inline constexpr uint32_t kRecvDbrWord = MLX5_RCV_DBR;
inline constexpr uint32_t kSendDbrWord = MLX5_SND_DBR;
inline constexpr uint32_t kCqConsumerMask = 0xffffff;

// What a send opcode (ctrl segment, bits 7:0 of opmod_idx_opcode) carries
// after its control segment, and the verbs operation it is.
struct SendOpcodeInfo {
  uint8_t opcode;      // MLX5_OPCODE_*
  const char* name;    // for the log channel
  bool nop;            // no operation: completes without touching a peer
  uint32_t wr_opcode;  // ibv_wr_opcode the engine executes (unused for NOP)
  bool raddr;          // a remote address segment follows the control segment
  bool atomic;         // an atomic segment follows the remote address segment
  bool gather;         // data / inline segments follow (what is sent or read into)
  // A DMA MMO (opmod kOpcModMmoDma): a metadata segment, then a source and
  // a destination data segment of one length (libmlx5's mlx5_mmo_wqe).
  bool dma_mmo = false;
  // A UMR: a UMR control segment, a memory key context, then the
  // translation inline (ParseSendWqe says which work request it is).
  bool umr = false;
};
const SendOpcodeInfo* FindSendOpcode(uint8_t opcode);

// Why a WQE could not be executed (all complete with LOCAL_QP_OP_ERR, as a
// ConnectX does for a WQE it cannot parse, or LOCAL_LENGTH_ERR).
enum class WqeError : uint8_t {
  kNone,
  kUnknownOpcode,    // opcode not in kSendOpcodes (or not supported by this device)
  kBadDs,            // ds is 0, smaller than the segments the opcode needs, or wraps the ring
  kQpnMismatch,      // qpn_ds names another QP
  kTooManySges,      // more data segments than a work request holds (device max_sge)
  kInlineTooLong,    // inline data longer than the device's max_inline_data
  kInlineOverrun,    // the inline byte count runs past the WQE's ds
  kInlineAfterData,  // inline bytes after a data segment (inline first is what is read)
  kBadAddress,       // a UD WQE's address vector names a source GID the port does not have
  kOffHost,          // a UD WQE's address vector leads off this host (the DEVX data path's)
  kAtomicSge,        // an atomic without exactly one 8-byte data segment
  kMmoSegments,      // a DMA MMO without its source and destination of one length
  kUmrSegments,      // a UMR without its segments, or a translation that is not read here
};
const char* WqeErrorName(WqeError error);

// A send WQE as the engine executes it.
struct ParsedSendWqe {
  uint16_t wqe_index = 0;     // ctrl's wqe_index: reported in the CQE's wqe_counter
  uint8_t opcode = 0;         // MLX5_OPCODE_*
  uint8_t fm_ce_se = 0;       // MLX5_WQE_CTRL_CQ_UPDATE (a CQE is wanted), SOLICITED, fence
  uint32_t basic_blocks = 1;  // WQEBBs the WQE occupies (ds * 16 rounded up to 64)
  const SendOpcodeInfo* info = nullptr;
  // opcode, flags, imm, raddr/rkey, atomics, SGEs or inline bytes; a UD
  // WQE's destination QP, Q_Key, GID and path (remote_qpn, remote_qkey,
  // dgid, path: its datagram segment's address vector), a DCI WQE's DCT,
  // access key and stream (remote_qpn, dc_key, dc_addr_set; dci_stream from
  // the control segment's dci_stream_channel_id)
  SendWr wr;
  uint8_t sgid_index = 0;  // UD, DC: the source GID's index (the caller fills wr.sgid)
};

// Reads the send WQE that starts at basic block `wqebb` of a send queue of
// `sq_basic_blocks` blocks (a power of two) at `sq`; a WQE may wrap to the
// start of the ring. `qpn`: the QP the ring belongs to; `address`: how
// its WQEs name their destination (a UD QP's and a DCI's carry a datagram
// segment, mlx5_wqe_av, after the control segment). On an error, the
// fields read so far (wqe_index, opcode, basic_blocks when known) are set.
enum class WqeAddress : uint8_t {
  kConnected,  // RC, UC: the QP's own destination
  kDatagram,   // UD: the address vector's QP and Q_Key
  kDc,         // a DCI: the address vector's DCT and DC access key
};
WqeError ParseSendWqe(const uint8_t* sq, uint32_t sq_basic_blocks, uint32_t wqebb, uint32_t qpn,
                      ParsedSendWqe* out, WqeAddress address = WqeAddress::kConnected);

// Reads a receive WQE of `stride` bytes (16 << log_rq_stride): data
// segments up to the first with lkey MLX5_INVALID_LKEY or the end of the
// stride. Returns the number of scatter entries (at most max_sge) in *num.
WqeError ParseRecvWqe(const uint8_t* wqe, uint32_t stride, RecvSge* sge, uint32_t max_sge,
                      uint32_t* num);

// Requester completions carry the WQE in wr_id: the mlx5 opcode and the
// WQE index, so the CQE can report both.
inline uint64_t RequesterWrId(uint8_t opcode, uint16_t wqe_index) {
  return uint64_t{opcode} << 32 | wqe_index;
}

// The CQE syndrome of an error completion status (MLX5_CQE_SYNDROME_*).
uint8_t SyndromeOf(uint32_t ibv_wc_status);

// Fills the 64-byte CQE at `cqe` for completion `c` of QP `qpn`, except
// its last byte (op_own), which the caller stores last, after a release
// fence, so a poller that sees the owner bit sees the whole CQE. Requester
// completions (c.opcode < IBV_WC_RECV, or a DRIVER opcode) take their WQE from c.wr_id
// (RequesterWrId); responder completions take the receive WQE counter from
// c.wr_id. Returns op_own without the owner bit.
uint8_t BuildCqe(const Completion& c, uint32_t qpn, uint8_t* cqe);

}  // namespace softverbs::datapath::mlx5
