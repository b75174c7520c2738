// Every limit the softverbs device advertises, in one place. The daemon
// enforces them and ibv_query_device reports them: a request above a limit
// fails, capabilities handed back are >= those asked for.
#pragma once

#include <infiniband/verbs.h>

#include <bit>
#include <cstdint>

namespace softverbs::limits {

inline constexpr const char* kDeviceName = "softverbs0";
inline constexpr const char* kFirmwareVersion = "0.1.0";
// No IEEE OUI of our own: 0xffffff, as Soft-RoCE (RXE_VENDOR_ID). Not 0:
// rdma-core's tests (test_device) require a non-zero vendor_id.
inline constexpr uint32_t kVendorId = 0xffffff;
inline constexpr uint32_t kVendorPartId = 0x5356;  // "SV"
inline constexpr uint32_t kHwVersion = 1;

inline constexpr uint64_t kMaxMrSize = 1ull << 36;
inline constexpr uint64_t kPageSizeCap = 0xfffff000ull;  // 4 KiB and up

inline constexpr int kMaxQp = 16384;
inline constexpr int kMaxQpWr = 16384;
inline constexpr int kMaxSge = 32;
inline constexpr int kMaxSgeRd = 32;
inline constexpr int kMaxCq = 16384;
// 2^20 - 1, as RoCE NICs report (irdma; ConnectX: 2^22 - 1): libfabric's
// ofi_rxm sizes one CQ for all its connections, (rx 128 + tx 128) x
// FI_UNIVERSE_SIZE 1024 = 262144 by default, without asking max_cqe. Costs
// address space only: a CQ file is sized for this (64 bytes a slot, twice
// the entries: 128 MiB), and only the pages of the slots in use are touched.
inline constexpr int kMaxCqe = (1 << 20) - 1;
// The entries a CQ created or resized with `cqe` (1..kMaxCqe) has: the next
// power of two above cqe, minus one, as mlx5 (align_queue_size(cqe + 1) - 1)
// and rxe (roundup_pow_of_two(cqe + 1) - 1) give: 16 -> 31, 31 -> 31.
constexpr int RoundedCqe(int cqe) {
  return static_cast<int>(std::bit_ceil(static_cast<unsigned>(cqe) + 1u) - 1u);
}
static_assert(RoundedCqe(1) == 1 && RoundedCqe(16) == 31 && RoundedCqe(kMaxCqe) == kMaxCqe);
inline constexpr int kMaxMr = 65536;
// Memory windows take their keys from the MRs' space (a device-table slot
// each): MRs and windows together stay within kMaxMr.
inline constexpr int kMaxMw = kMaxMr;
inline constexpr int kMaxPd = 16384;
inline constexpr int kMaxQpRdAtom = 128;      // max_rd_atomic (initiator depth)
inline constexpr int kMaxQpInitRdAtom = 128;  // max_dest_rd_atomic (responder depth)
inline constexpr int kMaxResRdAtom = kMaxQp * kMaxQpRdAtom;
inline constexpr int kMaxMcastGrp = 8192;
inline constexpr int kMaxMcastQpAttach = 56;
inline constexpr int kMaxTotalMcastQpAttach = kMaxMcastGrp * kMaxMcastQpAttach;
inline constexpr int kMaxAh = 65536;
// Flow steering rules (ibv_create_flow), device-wide. Every library that
// sends raw frames keeps a copy and looks at each rule per frame.
inline constexpr int kMaxFlows = 16384;
// Raw packet QPs: a frame carries at least mlx5's inline Ethernet header
// (MLX5_ETH_L2_INLINE_HEADER_SIZE: ibv_post_send fails with EINVAL below it,
// as libmlx5's does) and at most a 9000-byte jumbo payload with its Ethernet
// header and an 802.1Q tag (longer: IBV_WC_LOC_LEN_ERR).
inline constexpr uint32_t kMinRawFrameBytes = 18;
// RSS: receive work queues (ibv_create_wq, each a receive queue of its own:
// max_wq_type_rq as many as QPs), indirection tables of up to 2^8 of them,
// device-wide at most kMaxRwqIndTables tables.
inline constexpr uint32_t kMaxRwqIndTableLogSize = 8;
inline constexpr uint32_t kMaxRwqIndTableSize = 1u << kMaxRwqIndTableLogSize;
inline constexpr int kMaxRwqIndTables = 1024;
inline constexpr uint32_t kMaxRawFrameBytes = 9000 + 14 + 4;
inline constexpr int kMaxSrq = 16384;
inline constexpr int kMaxSrqWr = 16384;
inline constexpr int kMaxSrqSge = 32;
inline constexpr int kMaxXrcd = 1024;
// Device memory (ibv_alloc_dm): the device's whole on-chip memory, shared by
// every context (mlx5's MEMIC of a ConnectX-6 is 256 KiB). Allocations are
// rounded up to 64 bytes, as MEMIC's; ibv_memcpy_to/from_dm move whole
// 4-byte words (offset and length multiples of 4), as mlx5's.
inline constexpr uint64_t kMaxDmSize = 256 * 1024;
inline constexpr uint64_t kDmAllocGranule = 64;
inline constexpr uint64_t kDmAccessGranule = 4;
inline constexpr int kMaxDmLogAlign = 6;  // log_align_req up to the allocation granule
inline constexpr uint16_t kMaxPkeys = 1;  // one P_Key: the default 0xffff
inline constexpr uint16_t kDefaultPkey = 0xffff;
inline constexpr uint8_t kLocalCaAckDelay = 15;
// The most inline bytes a QP takes (cap.max_inline_data): 512, what mlx5
// QPs give the memory-key work requests whose layout rides inline (rdma-core's
// test_mlx5_mkey asks for it). Every queued SendWr has room for it.
inline constexpr uint32_t kMaxInlineData = 512;
inline constexpr int kNumCompVectors = 1;
// mlx5's DMA memcpy (mlx5dv_wr_memcpy): the longest copy one work request
// makes. A WR runs in one go in the thread that executes the send queue, so
// the bound keeps one WR's time short (16 MiB: a few milliseconds); mlx5
// reports its own in QUERY_HCA_CAP's log_dma_mmo_max_size (2 GiB when 0).
inline constexpr int kLogMaxWrMemcpyLength = 24;
inline constexpr uint64_t kMaxWrMemcpyLength = uint64_t{1} << kLogMaxWrMemcpyLength;
// mlx5's indirect memory keys (mlx5dv_create_mkey): the most entries one
// layout (mlx5dv_wr_mr_list, mlx5dv_wr_mr_interleaved) may have. The layout
// rides in its work request's inline bytes, as mlx5's UMR WQE carries it
// (datapath/mkey_layout.h: UmrEntry), so kMaxInlineData bounds it; libmlx5
// rounds max_entries up to a multiple of 4, so this is one too.
inline constexpr uint32_t kMaxMkeyEntries = 8;
// mlx5's DCI streams (mlx5dv_dci_streams_caps): a DCI may ask for up to 2^4
// concurrent streams and up to 2^4 streams in error before it moves to ERR.
inline constexpr uint8_t kMaxLogDciStreams = 4;
inline constexpr uint8_t kMaxLogDciErroredStreams = 4;
// On-demand paging (docs/datapath.md, "On-demand paging"): a reliable
// transport does every operation with ODP MRs. RC and XRC report them all,
// mlx5's DC all but RECV (a DCT receives through its SRQ).
inline constexpr uint32_t kOdpReliableOps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                            IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                                            IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
// Completion-event moderation (ibv_modify_cq): mlx5's ranges, the CQ
// context's 16-bit cq_max_count and 12-bit cq_period (microseconds).
inline constexpr uint16_t kMaxCqModerationCount = 0xffff;
inline constexpr uint16_t kMaxCqModerationPeriodUs = 0xfff;
// The device clock (completion timestamps, ibv_query_rt_values_ex) ticks in
// nanoseconds: 1 GHz (datapath::DeviceClockNs).
inline constexpr uint64_t kHcaCoreClockKhz = 1000000;
inline constexpr int kPhysPortCount = 1;

// Port attributes that do not depend on the host (rxe's values).
inline constexpr int kGidTableLength = 16;
inline constexpr uint32_t kMaxMsgSize = 1u << 31;
// ibv_port_attr.max_mtu, an ibv_mtu: 5 = IBV_MTU_4096 (rxe and mlx5 report it
// whatever the netdev MTU; path_mtu is checked against it, not active_mtu).
inline constexpr int kMaxMtu = 5;
inline constexpr uint8_t kActiveWidth = 2;  // IBV_WIDTH_4X
inline constexpr uint8_t kActiveSpeed = 1;  // SDR
inline constexpr uint8_t kPhysStateLinkUp = 5;

// Number spaces. QP numbers 0 and 1 are the special QPs of IB and never
// handed out; ranges are disjoint so a number's kind is visible in traces.
inline constexpr uint32_t kFirstQpn = 0x000011;
inline constexpr uint32_t kFirstCqn = 0x000001;
inline constexpr uint32_t kFirstSrqn = 0x000001;
inline constexpr uint32_t kMaxQpn = 0xffffff;
// MR keys: bits 8..30 an index (1..kMaxMrIndex), bit 31 set in rkeys only,
// the low byte a generation.
inline constexpr uint32_t kMaxMrIndex = 0x7fffff;

// QP numbers 0xffffff is the multicast QPN of IB.
inline constexpr uint32_t kMulticastQpn = 0xffffff;

}  // namespace softverbs::limits
