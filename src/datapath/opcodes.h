// What each work-request opcode means, in one table (as rxe's rxe_opcode.c):
// the QP types that may post it, the headers its request packets carry, its
// wire counterpart (IBTA opcodes), whether it may be inline, the access the
// responder needs, whether it consumes a receive WQE and carries immediate
// data or an invalidate, its completion opcodes and its send_ops flag.
// Posting checks, the ibv_wr_* API, the requester, the responder and the
// completer ask this table; nothing else switches on an ibv_wr_opcode.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <iterator>

#include "datapath/ibta_opcode.h"
#include "verbs/qp_names.h"

namespace softverbs::datapath {

// A set of ibv_qp_type values (bit 1 << type).
using QpTypeSet = uint32_t;
constexpr QpTypeSet QpTypeBit(uint32_t type) {
  return type < 32 ? 1u << type : 0;
}
inline constexpr QpTypeSet kReliableRequesters =
    QpTypeBit(IBV_QPT_RC) | QpTypeBit(IBV_QPT_XRC_SEND);
inline constexpr QpTypeSet kConnectedRequesters = kReliableRequesters | QpTypeBit(IBV_QPT_UC);
inline constexpr QpTypeSet kAllRequesters = kConnectedRequesters | QpTypeBit(IBV_QPT_UD);
// mlx5's DCI: a reliable requester whose every WR names its DCT
// (mlx5dv_wr_set_dc_addr). It has SENDs, WRITEs, READs and atomics; no
// memory-window, invalidate or ATOMIC WRITE operations here.
inline constexpr QpTypeSet kDcRequester = QpTypeBit(verbs::kQptDcIni);
// A raw packet QP sends Ethernet frames: SEND only (TSO is not supported).
inline constexpr QpTypeSet kRawRequester = QpTypeBit(IBV_QPT_RAW_PACKET);

// What the responder does with the request.
enum class WrAction : uint8_t {
  kSend,     // claims a receive WQE and copies the payload into it
  kWrite,    // copies the payload to the remote address
  kRead,     // copies the remote bytes back into the local SGEs
  kAtomic,   // 8-byte CPU atomic at the remote address; old value back
  kLocal,    // no packet: the device's own work (LocalOp)
  kUnknown,  // not an opcode
};

// The work of an operation without a packet (WrAction::kLocal), done in the
// send queue's order (local_ops.h).
enum class LocalOp : uint8_t {
  kNone,           // not a local operation
  kInvalidate,     // LOCAL_INV: invalidates a type 2 window (imm_data: its rkey)
  kBindWindow,     // BIND_MW: binds a type 2 window
  kMemcpy,         // mlx5's DMA memcpy: copies between two local ranges by lkey
  kConfigureMkey,  // mlx5's UMR: gives an indirect memory key its layout and access
};

struct WrOpcodeInfo {
  const char* name = "UNKNOWN";                     // for logs and traces
  WrAction action = WrAction::kUnknown;             // what the responder does
  QpTypeSet qp_types = 0;                           // requesters that may post it (0: none)
  uint8_t headers = 0;                              // WireHeader bits of its requests
  IbtaOperation wire_only = IbtaOperation::kNone;   // the request when it fits one packet
  IbtaOperation wire_first = IbtaOperation::kNone;  // first packet of a longer one (kNone: one)
  bool inline_allowed = false;                      // IBV_SEND_INLINE may carry its payload
  uint32_t remote_access = 0;           // IBV_ACCESS_* the responder's QP and rkey must grant
  bool writes_local = false;            // the result lands in the local SGEs (LOCAL_WRITE needed)
  bool consumes_recv = false;           // claims a receive WQE at the responder
  bool immediate = false;               // carries imm_data (IBV_WC_WITH_IMM at the receiver)
  bool invalidate = false;              // carries an rkey to invalidate (IBV_WC_WITH_INV)
  bool atomic_write = false;            // its 8-byte payload lands in one store, aligned
  LocalOp local_op = LocalOp::kNone;    // kLocal: which work
  bool vendor = false;                  // a vendor WR: its builder makes it, not ibv_post_send
  ibv_wc_opcode send_wc = IBV_WC_SEND;  // the requester's completion opcode
  ibv_wc_opcode recv_wc = IBV_WC_RECV;  // the receiver's (consumes_recv)
  uint64_t send_ops_flag = 0;           // its IBV_QP_EX_WITH_* bit
};

// One row per ibv_wr_opcode value, in its order (static_asserts below).
// TSO is named but not supported (docs/status.md): no QP type may post it
// (qp_types 0).
inline constexpr WrOpcodeInfo kWrOpcodeRows[] = {
    {.name = "RDMA_WRITE",
     .action = WrAction::kWrite,
     .qp_types = kConnectedRequesters | kDcRequester,
     .headers = kHeaderReth,
     .wire_only = IbtaOperation::kWriteOnly,
     .wire_first = IbtaOperation::kWriteFirst,
     .inline_allowed = true,
     .remote_access = IBV_ACCESS_REMOTE_WRITE,
     .send_wc = IBV_WC_RDMA_WRITE,
     .send_ops_flag = IBV_QP_EX_WITH_RDMA_WRITE},
    {.name = "RDMA_WRITE_WITH_IMM",
     .action = WrAction::kWrite,
     .qp_types = kConnectedRequesters | kDcRequester,
     .headers = kHeaderReth | kHeaderImmDt,
     .wire_only = IbtaOperation::kWriteOnlyWithImm,
     .wire_first = IbtaOperation::kWriteFirst,
     .inline_allowed = true,
     .remote_access = IBV_ACCESS_REMOTE_WRITE,
     .consumes_recv = true,
     .immediate = true,
     .send_wc = IBV_WC_RDMA_WRITE,
     .recv_wc = IBV_WC_RECV_RDMA_WITH_IMM,
     .send_ops_flag = IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM},
    {.name = "SEND",
     .action = WrAction::kSend,
     .qp_types = kAllRequesters | kDcRequester | kRawRequester,
     .wire_only = IbtaOperation::kSendOnly,
     .wire_first = IbtaOperation::kSendFirst,
     .inline_allowed = true,
     .consumes_recv = true,
     .send_ops_flag = IBV_QP_EX_WITH_SEND},
    {.name = "SEND_WITH_IMM",
     .action = WrAction::kSend,
     .qp_types = kAllRequesters | kDcRequester,
     .headers = kHeaderImmDt,
     .wire_only = IbtaOperation::kSendOnlyWithImm,
     .wire_first = IbtaOperation::kSendFirst,
     .inline_allowed = true,
     .consumes_recv = true,
     .immediate = true,
     .send_ops_flag = IBV_QP_EX_WITH_SEND_WITH_IMM},
    {.name = "RDMA_READ",
     .action = WrAction::kRead,
     .qp_types = kReliableRequesters | kDcRequester,
     .headers = kHeaderReth,
     .wire_only = IbtaOperation::kReadRequest,
     .remote_access = IBV_ACCESS_REMOTE_READ,
     .writes_local = true,
     .send_wc = IBV_WC_RDMA_READ,
     .send_ops_flag = IBV_QP_EX_WITH_RDMA_READ},
    {.name = "ATOMIC_CMP_AND_SWP",
     .action = WrAction::kAtomic,
     .qp_types = kReliableRequesters | kDcRequester,
     .headers = kHeaderAtomicEth,
     .wire_only = IbtaOperation::kCompareSwap,
     .remote_access = IBV_ACCESS_REMOTE_ATOMIC,
     .writes_local = true,
     .send_wc = IBV_WC_COMP_SWAP,
     .send_ops_flag = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP},
    {.name = "ATOMIC_FETCH_AND_ADD",
     .action = WrAction::kAtomic,
     .qp_types = kReliableRequesters | kDcRequester,
     .headers = kHeaderAtomicEth,
     .wire_only = IbtaOperation::kFetchAdd,
     .remote_access = IBV_ACCESS_REMOTE_ATOMIC,
     .writes_local = true,
     .send_wc = IBV_WC_FETCH_ADD,
     .send_ops_flag = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD},
    {.name = "LOCAL_INV",
     .action = WrAction::kLocal,
     .qp_types = kConnectedRequesters,
     .local_op = LocalOp::kInvalidate,
     .send_wc = IBV_WC_LOCAL_INV,
     .send_ops_flag = IBV_QP_EX_WITH_LOCAL_INV},
    {.name = "BIND_MW",
     .action = WrAction::kLocal,
     .qp_types = kConnectedRequesters,
     .local_op = LocalOp::kBindWindow,
     .send_wc = IBV_WC_BIND_MW,
     .send_ops_flag = IBV_QP_EX_WITH_BIND_MW},
    // RC only: an XRC target's windows are in its SRQ's PD, which the
    // responder does not check against (docs/status.md).
    {.name = "SEND_WITH_INV",
     .action = WrAction::kSend,
     .qp_types = QpTypeBit(IBV_QPT_RC),
     .headers = kHeaderIeth,
     .wire_only = IbtaOperation::kSendOnlyWithInvalidate,
     .wire_first = IbtaOperation::kSendFirst,
     .inline_allowed = true,
     .consumes_recv = true,
     .invalidate = true,
     .send_ops_flag = IBV_QP_EX_WITH_SEND_WITH_INV},
    {.name = "TSO",
     .action = WrAction::kSend,
     .wire_only = IbtaOperation::kSendOnly,
     .wire_first = IbtaOperation::kSendFirst,
     .consumes_recv = true,
     .send_wc = IBV_WC_TSO,
     .send_ops_flag = IBV_QP_EX_WITH_TSO},
    {.name = "DRIVER1"},  // provider-specific: none here
    {},                   // 12-14: not opcodes in rdma-core 44
    {},
    {},
    // IBTA 1.5 ATOMIC WRITE: an RDMA WRITE of exactly 8 bytes that the
    // responder stores at once (8-byte aligned), needing remote write access
    // as rxe does. It takes a responder resource and is answered by a READ
    // RESPONSE ONLY without payload (WrTakesResponse).
    {.name = "ATOMIC_WRITE",
     .action = WrAction::kWrite,
     .qp_types = kReliableRequesters,
     .headers = kHeaderReth,
     .wire_only = IbtaOperation::kAtomicWrite,
     .inline_allowed = true,
     .remote_access = IBV_ACCESS_REMOTE_WRITE,
     .atomic_write = true,
     .send_wc = IBV_WC_ATOMIC_WRITE,
     .send_ops_flag = IBV_QP_EX_WITH_ATOMIC_WRITE},
    // mlx5's DMA memcpy (mlx5dv_wr_memcpy, kWrMlx5Memcpy): a copy between
    // two ranges of the QP's PD, by lkey, the destination locally writable;
    // libmlx5 has it on RC QPs and DCIs created with MLX5DV_QP_EX_WITH_MEMCPY
    // (that flag, not send_ops_flags, allows it). Its completion opcode is
    // MLX5DV_WC_MEMCPY.
    {.name = "MLX5_MEMCPY",
     .action = WrAction::kLocal,
     .qp_types = QpTypeBit(IBV_QPT_RC) | kDcRequester,
     .writes_local = true,
     .local_op = LocalOp::kMemcpy,
     .vendor = true,
     .send_wc = IBV_WC_DRIVER3},
    // mlx5's UMR (mlx5dv_wr_mr_list, mlx5dv_wr_mr_interleaved,
    // mlx5dv_wr_mkey_configure; kWrMlx5Umr): gives an indirect memory key
    // its layout (the WR's inline bytes: UmrEntry) and access. libmlx5 has
    // it on RC QPs created with one of the memory-key send_ops flags. Its
    // completion opcode is MLX5DV_WC_UMR.
    {.name = "MLX5_UMR",
     .action = WrAction::kLocal,
     .qp_types = QpTypeBit(IBV_QPT_RC),
     .local_op = LocalOp::kConfigureMkey,
     .vendor = true,
     .send_wc = IBV_WC_DRIVER1},
};

static_assert(IBV_WR_RDMA_WRITE == 0 && IBV_WR_RDMA_WRITE_WITH_IMM == 1 && IBV_WR_SEND == 2 &&
              IBV_WR_SEND_WITH_IMM == 3 && IBV_WR_RDMA_READ == 4 &&
              IBV_WR_ATOMIC_CMP_AND_SWP == 5 && IBV_WR_ATOMIC_FETCH_AND_ADD == 6 &&
              IBV_WR_LOCAL_INV == 7 && IBV_WR_BIND_MW == 8 && IBV_WR_SEND_WITH_INV == 9 &&
              IBV_WR_TSO == 10 && IBV_WR_DRIVER1 == 11 && IBV_WR_ATOMIC_WRITE == 15);
// Vendor work requests, numbered past rdma-core's ibv_wr_opcode values.
inline constexpr uint32_t kWrMlx5Memcpy = IBV_WR_ATOMIC_WRITE + 1;
inline constexpr uint32_t kWrMlx5Umr = kWrMlx5Memcpy + 1;
static_assert(std::size(kWrOpcodeRows) == kWrMlx5Umr + 1);

// A work request's headers are those of its one-packet request (the wire
// rows of ibta_opcode.h): the two tables cannot disagree.
constexpr bool WrHeadersMatchWire() {
  for (const WrOpcodeInfo& row : kWrOpcodeRows) {
    if (row.wire_only != IbtaOperation::kNone &&
        row.headers != IbtaOperationRow(row.wire_only).headers)
      return false;
  }
  return true;
}
static_assert(WrHeadersMatchWire());

// Any other value: no QP type may post it.
inline constexpr WrOpcodeInfo kUnknownWrOpcode{};

// The row of an ibv_wr_opcode; an unknown value gets a row of kUnknown
// action that no QP type may post.
constexpr const WrOpcodeInfo& WrOpcode(uint32_t opcode) {
  return opcode < std::size(kWrOpcodeRows) ? kWrOpcodeRows[opcode] : kUnknownWrOpcode;
}

// Whether the responder answers the request with a response of its own (a
// READ response, an atomic's original value, an ATOMIC WRITE's empty READ
// response) rather than an ACK alone: such a request takes one of the
// responder's resources (max_rd_atomic), and its answer is kept to be
// replayed for a duplicate.
constexpr bool WrTakesResponse(const WrOpcodeInfo& info) {
  return info.action == WrAction::kRead || info.action == WrAction::kAtomic || info.atomic_write;
}

// Whether a requester QP of this type may post the opcode.
inline bool WrOpcodeAllowed(const WrOpcodeInfo& info, uint32_t qp_type) {
  return (info.qp_types & QpTypeBit(qp_type)) != 0;
}

// The IBV_QP_EX_WITH_* operations a QP of this type can be created with.
uint64_t SendOpsFlagsOf(uint32_t qp_type);

// The BTH transport of a requester QP type.
IbtaTransport TransportOf(uint32_t qp_type);

}  // namespace softverbs::datapath
