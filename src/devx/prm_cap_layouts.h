// Field tables of what the query commands return: general device caps
// (cmd_hca_cap, §3.1), general caps 2, hca_vport_context (§3.2) and the
// adapter parameter block. Offsets are in bits relative to the structure.
#ifndef SOFTVERBS_DEVX_PRM_CAP_LAYOUTS_H_
#define SOFTVERBS_DEVX_PRM_CAP_LAYOUTS_H_

#include "prm_bits.h"

namespace softverbs::devx::layout {

// QUERY_HCA_CAP op_mod = (cap_type << 1) | current.
namespace hca_cap_type {
inline constexpr uint32_t kGeneral = 0x00;
inline constexpr uint32_t kEthernetOffloads = 0x01;
inline constexpr uint32_t kOdp = 0x02;
inline constexpr uint32_t kAtomic = 0x03;
inline constexpr uint32_t kRoce = 0x04;
inline constexpr uint32_t kNicFlowTable = 0x07;
inline constexpr uint32_t kQos = 0x0c;
inline constexpr uint32_t kDeviceMemory = 0x0f;
inline constexpr uint32_t kGeneral2 = 0x20;
}  // namespace hca_cap_type

namespace hca_cap {
inline constexpr Field kVhcaResourceManager{0x1f, 1};
inline constexpr Field kHcaCap2{0x20, 1};
inline constexpr Field kVhcaId{0x30, 16};
inline constexpr Field kLogDmaMmoMaxSize{0x6b, 5};
inline constexpr Field kLogMaxSrqSz{0x80, 8};
inline constexpr Field kLogMaxQpSz{0x88, 8};
inline constexpr Field kEventCap{0x90, 1};
inline constexpr Field kLogMaxQp{0x9b, 5};
inline constexpr Field kLogMaxCqSz{0xc8, 8};
inline constexpr Field kLogMaxCq{0xdb, 5};
inline constexpr Field kLogMaxEqSz{0xe0, 8};
inline constexpr Field kLogMaxMkey{0xea, 6};
inline constexpr Field kLogMaxEq{0xfc, 4};
inline constexpr Field kMaxIndirection{0x100, 8};
inline constexpr Field kLogMaxMrwSz{0x109, 7};
inline constexpr Field kLogMaxKlmListSize{0x11a, 6};
inline constexpr Field kLogMaxRaReqQp{0x14a, 6};
inline constexpr Field kDmaMmoSq{0x153, 1};
inline constexpr Field kLogMaxRaResQp{0x15a, 6};
inline constexpr Field kEndPad{0x160, 1};
inline constexpr Field kGidTableSize{0x170, 16};
inline constexpr Field kPkeyTableSize{0x190, 16};
inline constexpr Field kLocalCaAckDelay{0x1ab, 5};
inline constexpr Field kPortType{0x1b6, 2};
inline constexpr Field kNumPorts{0x1b8, 8};
inline constexpr Field kLogMaxMsg{0x1c3, 5};
inline constexpr Field kMaxTc{0x1cc, 4};
inline constexpr Field kCqeVersion{0x1fc, 4};
inline constexpr Field kAtomic{0x21e, 1};
inline constexpr Field kCqOi{0x220, 1};
inline constexpr Field kCqResize{0x221, 1};
inline constexpr Field kCqModeration{0x222, 1};
inline constexpr Field kXrc{0x23c, 1};
inline constexpr Field kUd{0x23d, 1};
inline constexpr Field kUc{0x23e, 1};
inline constexpr Field kRc{0x23f, 1};
inline constexpr Field kUar4k{0x240, 1};
inline constexpr Field kUarSz{0x24a, 6};
inline constexpr Field kUmemUid0{0x252, 1};
inline constexpr Field kLogPgSz{0x258, 8};
inline constexpr Field kBf{0x260, 1};
inline constexpr Field kLogBfRegSize{0x26b, 5};
inline constexpr Field kMaxWqeSzSq{0x290, 16};
inline constexpr Field kMaxWqeSzRq{0x2b0, 16};
inline constexpr Field kMaxFlowCounter31To16{0x2c0, 16};
inline constexpr Field kFlowCounterBulkAlloc{0x310, 8};
inline constexpr Field kLogMaxTransportDomain{0x323, 5};
inline constexpr Field kLogMaxPd{0x32b, 5};
inline constexpr Field kLogMaxXrcd{0x33b, 5};
inline constexpr Field kLogMaxFlowCounterBulk{0x348, 8};
inline constexpr Field kMaxFlowCounter15To0{0x350, 16};
inline constexpr Field kLogMaxWqSz{0x3db, 5};
inline constexpr Field kSqTsFormat{0x440, 2};
inline constexpr Field kRqTsFormat{0x442, 2};
inline constexpr Field kLogMaxUctx{0x463, 5};
inline constexpr Field kMaxNumEqs{0x470, 16};
inline constexpr Field kLogUarPageSz{0x490, 16};
inline constexpr Field kDeviceFrequencyKhz{0x4e0, 32};
inline constexpr Field kNumOfUarsPerPage{0x520, 32};
inline constexpr Field kLogMaxAtomicSizeQp{0x580, 8};
}  // namespace hca_cap

namespace hca_cap2 {
inline constexpr Field kQueryVuid{0x92, 1};
inline constexpr Field kSwVhcaIdValid{0x221, 1};
inline constexpr Field kSwVhcaId{0x222, 14};
inline constexpr Field kSendDbrModeNoDbrInt{0x2e0, 1};
inline constexpr Field kSendDbrModeNoDbrExt{0x2e1, 1};
inline constexpr Field kLogMaxSendDbrLessQpSq{0x2e3, 5};
}  // namespace hca_cap2

namespace hca_vport_context {
inline constexpr Field kFieldSelect{0x00, 32};
inline constexpr Field kSmVirtAware{0x100, 1};
inline constexpr Field kHasSmi{0x101, 1};
inline constexpr Field kHasRaw{0x102, 1};
inline constexpr Field kGrhRequired{0x103, 1};
inline constexpr Field kPortPhysicalState{0x110, 4};
inline constexpr Field kVportStatePolicy{0x114, 4};
inline constexpr Field kPortState{0x118, 4};
inline constexpr Field kVportState{0x11c, 4};
inline constexpr Field kSystemImageGuid = ByteField(0x28, 8);
inline constexpr Field kPortGuid = ByteField(0x30, 8);
inline constexpr Field kNodeGuid = ByteField(0x38, 8);
inline constexpr Field kCapMask1{0x200, 32};
inline constexpr Field kCapMask2{0x240, 32};
inline constexpr Field kOooSlMask{0x290, 16};
inline constexpr Field kLid{0x300, 16};
inline constexpr Field kInitTypeReply{0x314, 4};
inline constexpr Field kLmc{0x318, 3};
inline constexpr Field kSubnetTimeout{0x31b, 5};
inline constexpr Field kSmLid{0x320, 16};
inline constexpr Field kSmSl{0x330, 4};
inline constexpr Field kQkeyViolationCounter{0x340, 16};
inline constexpr Field kPkeyViolationCounter{0x350, 16};
}  // namespace hca_vport_context

// query_adapter_param_block. Not in the spec's tables: these two fields are
// the mlx5_ifc.h layout as remembered, see docs/devx.md.
namespace adapter {
inline constexpr Field kIeeeVendorId{0xc8, 24};
inline constexpr Field kVsdVendorId{0xf0, 16};
}  // namespace adapter

}  // namespace softverbs::devx::layout

#endif  // SOFTVERBS_DEVX_PRM_CAP_LAYOUTS_H_
