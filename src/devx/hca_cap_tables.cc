#include "hca_cap_tables.h"

#include <algorithm>

#include "command.h"
#include "prm_bits.h"
#include "prm_cap_layouts.h"

namespace softverbs::devx {
namespace {

using namespace layout;

struct CapRow {
  Field field;
  uint32_t (*value)(const DeviceCaps& caps);
};

// Largest WQE: control + remote address + one data segment per SGE, 16 B each.
uint32_t MaxSendWqeBytes(const DeviceCaps& caps) {
  return 16 * (2 + caps.max_sge);
}

// Smallest supported page: the lowest bit of page_size_cap.
uint32_t LogMinPageSize(const DeviceCaps& caps) {
  return caps.page_size_cap == 0 ? 12 : Log2Floor(caps.page_size_cap & -caps.page_size_cap);
}

// General device caps (op_mod 0x00/0x01). The numbers come from DeviceCaps;
// the constants describe this firmware itself.
constexpr CapRow kGeneralCaps[] = {
    {hca_cap::kHcaCap2, [](const DeviceCaps&) -> uint32_t { return 1; }},
    {hca_cap::kVhcaId, [](const DeviceCaps& c) -> uint32_t { return c.vhca_id; }},
    {hca_cap::kLogMaxSrqSz, [](const DeviceCaps& c) { return Log2Floor(c.max_srq_wr); }},
    {hca_cap::kLogMaxQpSz, [](const DeviceCaps& c) { return Log2Floor(c.max_qp_wr); }},
    {hca_cap::kLogMaxQp, [](const DeviceCaps& c) { return Log2Floor(c.max_qp); }},
    // ibv reports max_cqe as 2^n - 1.
    {hca_cap::kLogMaxCqSz, [](const DeviceCaps& c) { return Log2Floor(uint64_t{c.max_cqe} + 1); }},
    {hca_cap::kLogMaxCq, [](const DeviceCaps& c) { return Log2Floor(c.max_cq); }},
    {hca_cap::kLogMaxEq,
     [](const DeviceCaps& c) { return Log2Floor(std::max<uint32_t>(c.num_comp_vectors, 1)); }},
    {hca_cap::kLogMaxMkey, [](const DeviceCaps& c) { return Log2Floor(c.max_mr); }},
    {hca_cap::kLogMaxMrwSz, [](const DeviceCaps& c) { return Log2Floor(c.max_mr_size); }},
    {hca_cap::kLogMaxRaReqQp, [](const DeviceCaps& c) { return Log2Floor(c.max_qp_init_rd_atom); }},
    {hca_cap::kLogMaxRaResQp, [](const DeviceCaps& c) { return Log2Floor(c.max_qp_rd_atom); }},
    // DMA memcpy through the send queue of RC QPs and DCIs
    // (mlx5dv_wr_memcpy), no per-QP enabling (dma_mmo_qp 0).
    {hca_cap::kDmaMmoSq,
     [](const DeviceCaps& c) -> uint32_t { return c.log_dma_mmo_max_size != 0 ? 1 : 0; }},
    {hca_cap::kLogDmaMmoMaxSize,
     [](const DeviceCaps& c) -> uint32_t { return c.log_dma_mmo_max_size; }},
    {hca_cap::kGidTableSize, [](const DeviceCaps& c) { return c.port.gid_table_len; }},
    {hca_cap::kPkeyTableSize, [](const DeviceCaps& c) { return c.port.pkey_table_len; }},
    {hca_cap::kLocalCaAckDelay,
     [](const DeviceCaps& c) -> uint32_t { return c.local_ca_ack_delay; }},
    {hca_cap::kPortType, [](const DeviceCaps& c) -> uint32_t { return c.port.ethernet ? 1 : 0; }},
    {hca_cap::kNumPorts, [](const DeviceCaps& c) -> uint32_t { return c.phys_port_cnt; }},
    {hca_cap::kLogMaxMsg, [](const DeviceCaps& c) { return Log2Floor(c.port.max_msg_size); }},
    // CQE format version 1, the one rdma-core's mlx5 provider expects.
    {hca_cap::kCqeVersion, [](const DeviceCaps&) -> uint32_t { return 1; }},
    {hca_cap::kAtomic, [](const DeviceCaps& c) -> uint32_t { return c.atomic; }},
    {hca_cap::kXrc, [](const DeviceCaps& c) -> uint32_t { return c.xrc; }},
    {hca_cap::kUd, [](const DeviceCaps&) -> uint32_t { return 1; }},
    {hca_cap::kUc, [](const DeviceCaps&) -> uint32_t { return 1; }},
    {hca_cap::kRc, [](const DeviceCaps&) -> uint32_t { return 1; }},
    {hca_cap::kUar4k, [](const DeviceCaps&) -> uint32_t { return 1; }},
    {hca_cap::kLogPgSz, LogMinPageSize},
    {hca_cap::kMaxWqeSzSq, MaxSendWqeBytes},
    {hca_cap::kMaxWqeSzRq, [](const DeviceCaps& c) { return 16 * c.max_sge; }},
    {hca_cap::kMaxFlowCounter31To16, [](const DeviceCaps& c) { return c.max_flow_counters >> 16; }},
    {hca_cap::kMaxFlowCounter15To0, [](const DeviceCaps& c) { return c.max_flow_counters; }},
    {hca_cap::kLogMaxFlowCounterBulk,
     [](const DeviceCaps& c) -> uint32_t { return c.log_max_flow_counter_bulk; }},
    {hca_cap::kLogMaxTransportDomain,
     [](const DeviceCaps& c) { return Log2Floor(c.max_transport_domains); }},
    {hca_cap::kLogMaxPd, [](const DeviceCaps& c) { return Log2Floor(c.max_pd); }},
    {hca_cap::kLogMaxWqSz, [](const DeviceCaps& c) { return Log2Floor(c.max_qp_wr); }},
    // DEVX uids are 16 bits; the kernel needs a non-zero value to enable DEVX.
    {hca_cap::kLogMaxUctx, [](const DeviceCaps&) -> uint32_t { return 16; }},
    {hca_cap::kMaxNumEqs, [](const DeviceCaps& c) { return c.num_comp_vectors; }},
    {hca_cap::kDeviceFrequencyKhz, [](const DeviceCaps& c) { return c.device_frequency_khz; }},
    {hca_cap::kNumOfUarsPerPage, [](const DeviceCaps&) -> uint32_t { return 1; }},
    // 8-byte atomics when atomics are supported at all.
    {hca_cap::kLogMaxAtomicSizeQp,
     [](const DeviceCaps& c) -> uint32_t { return c.atomic ? 3 : 0; }},
};

// General device caps 2 (op_mod 0x40/0x41).
constexpr CapRow kGeneralCaps2[] = {
    {hca_cap2::kSendDbrModeNoDbrExt,
     [](const DeviceCaps& c) -> uint32_t { return c.send_dbr_less; }},
    {hca_cap2::kLogMaxSendDbrLessQpSq,
     [](const DeviceCaps& c) { return c.send_dbr_less ? Log2Floor(c.max_qp) : 0; }},
};

// hca_vport_context of a port: the ibv_query_port view.
constexpr CapRow kVportContext[] = {
    {hca_vport_context::kHasSmi, [](const DeviceCaps& c) -> uint32_t { return !c.port.ethernet; }},
    {hca_vport_context::kPortPhysicalState,
     [](const DeviceCaps& c) -> uint32_t { return c.port.physical_state; }},
    {hca_vport_context::kPortState, [](const DeviceCaps& c) -> uint32_t { return c.port.state; }},
    {hca_vport_context::kVportState, [](const DeviceCaps& c) -> uint32_t { return c.port.state; }},
    {hca_vport_context::kCapMask1, [](const DeviceCaps& c) { return c.port.port_cap_flags; }},
    {hca_vport_context::kLid, [](const DeviceCaps& c) -> uint32_t { return c.port.lid; }},
    {hca_vport_context::kLmc, [](const DeviceCaps& c) -> uint32_t { return c.port.lmc; }},
    {hca_vport_context::kSubnetTimeout,
     [](const DeviceCaps& c) -> uint32_t { return c.port.subnet_timeout; }},
    {hca_vport_context::kSmLid, [](const DeviceCaps& c) -> uint32_t { return c.port.sm_lid; }},
    {hca_vport_context::kSmSl, [](const DeviceCaps& c) -> uint32_t { return c.port.sm_sl; }},
};

template <size_t N>
void WriteRows(const CapRow (&rows)[N], const DeviceCaps& caps, std::span<uint8_t> box) {
  for (const CapRow& row : rows) SetField(box, row.field, row.value(caps));
}

}  // namespace

void WriteGeneralCaps(const DeviceCaps& caps, std::span<uint8_t> cap) {
  WriteRows(kGeneralCaps, caps, cap);
}

void WriteGeneralCaps2(const DeviceCaps& caps, std::span<uint8_t> cap) {
  WriteRows(kGeneralCaps2, caps, cap);
}

void WriteHcaVportContext(const DeviceCaps& caps, std::span<uint8_t> context) {
  WriteRows(kVportContext, caps, context);
  SetField64(context, hca_vport_context::kSystemImageGuid, caps.sys_image_guid);
  SetField64(context, hca_vport_context::kPortGuid, caps.port.port_guid);
  SetField64(context, hca_vport_context::kNodeGuid, caps.node_guid);
}

}  // namespace softverbs::devx
