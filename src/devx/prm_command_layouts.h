// Field tables of the PRM command boxes: the common headers and the
// command-specific input/output fields (spec §1.1, §1.2, §3). Offsets are in
// bits from the start of the box; sizes are in bytes.
#ifndef SOFTVERBS_DEVX_PRM_COMMAND_LAYOUTS_H_
#define SOFTVERBS_DEVX_PRM_COMMAND_LAYOUTS_H_

#include <cstddef>

#include "prm_bits.h"

namespace softverbs::devx::layout {

// Input header: the first 8 bytes of every command.
namespace in_hdr {
inline constexpr Field kOpcode{0x00, 16};
inline constexpr Field kUid{0x10, 16};
inline constexpr Field kVhcaTunnelId{0x20, 16};
inline constexpr Field kOpMod{0x30, 16};
inline constexpr size_t kBytes = 8;
}  // namespace in_hdr

// general_obj_in_cmd_hdr: obj_type replaces op_mod.
namespace general_obj_hdr {
inline constexpr Field kObjType{0x30, 16};
inline constexpr Field kObjId{0x40, 32};
}  // namespace general_obj_hdr

// Output header: the first 8 bytes of every answer.
namespace out_hdr {
inline constexpr Field kStatus{0x00, 8};
inline constexpr Field kSyndrome{0x20, 32};
inline constexpr size_t kBytes = 8;
}  // namespace out_hdr

// The 24-bit object number most commands carry at DW2[23:0], both as the
// target of destroy/query/modify and as the answer of create.
inline constexpr Field kObjectNumber{0x48, 24};
// Answers of create commands are 16 bytes; the number must fit.
inline constexpr size_t kCreateOutBytes = 16;

namespace query_hca_cap {
inline constexpr Field kOtherFunction{0x40, 1};
inline constexpr Field kFunctionId{0x50, 16};
inline constexpr size_t kCapabilityByte = 0x10;
inline constexpr size_t kCapabilityBytes = 4096;
inline constexpr size_t kOutBytes = kCapabilityByte + kCapabilityBytes;
}  // namespace query_hca_cap

namespace query_hca_vport_context {
inline constexpr Field kOtherVport{0x40, 1};
inline constexpr Field kPortNum{0x4c, 4};
inline constexpr Field kVportNumber{0x50, 16};
inline constexpr size_t kContextByte = 0x10;
inline constexpr size_t kOutBytes = kContextByte + 512;
}  // namespace query_hca_vport_context

namespace query_adapter {
inline constexpr size_t kParamBlockByte = 0x10;
inline constexpr size_t kOutBytes = kParamBlockByte + 0x100;
}  // namespace query_adapter

namespace create_cq {
inline constexpr size_t kCqcByte = 0x10;
inline constexpr Field kCqUmemOffset = ByteField(0x50, 8);
inline constexpr Field kCqUmemId{0x2c0, 32};
inline constexpr Field kCqUmemValid{0x2e0, 1};
// Everything up to and including cq_umem_valid must be present.
inline constexpr size_t kMinInBytes = 0x60;
}  // namespace create_cq

namespace query_cq {
inline constexpr size_t kCqcByte = 0x10;
inline constexpr size_t kOutBytes = 0x110;
}  // namespace query_cq

// CREATE_QP, the QP transitions and QUERY_QP share this shape.
namespace qp_cmd {
inline constexpr Field kQpn = kObjectNumber;
inline constexpr Field kOptParamMask{0x80, 32};
inline constexpr size_t kQpcByte = 0x18;
// Transitions other than 2ERR/2RST must carry the whole qpc.
inline constexpr size_t kMinInBytesWithQpc = 0x100;
}  // namespace qp_cmd

namespace create_qp {
inline constexpr Field kWqUmemOffset = ByteField(0x100, 8);
inline constexpr Field kWqUmemId{0x840, 32};
inline constexpr Field kWqUmemValid{0x860, 1};
inline constexpr size_t kMinInBytes = 0x110;
}  // namespace create_qp

namespace query_qp {
inline constexpr size_t kOutBytes = 0x110;  // 272, what the async test asks for.
}  // namespace query_qp

namespace create_mkey {
inline constexpr Field kPgAccess{0x60, 1};
inline constexpr Field kMkeyUmemValid{0x61, 1};
inline constexpr size_t kMkcByte = 0x10;
inline constexpr Field kTranslationsOctwordActualSize{0x300, 32};
inline constexpr Field kMkeyUmemId{0x320, 32};
inline constexpr Field kMkeyUmemOffset = ByteField(0x68, 8);
// The kernel itself rejects a CREATE_MKEY box that does not cover the mkc.
inline constexpr size_t kMinInBytes = kMkcByte + 64;
}  // namespace create_mkey

namespace query_mkey {
inline constexpr size_t kMkcByte = 0x10;
inline constexpr size_t kOutBytes = 0x130;
}  // namespace query_mkey

namespace alloc_flow_counter {
inline constexpr Field kFlowCounterId{0x40, 32};  // in: bulk base; out: the id
inline constexpr Field kBulkLogSize{0x73, 5};
inline constexpr Field kBulk{0x78, 8};  // in units of 128 counters
}  // namespace alloc_flow_counter

namespace query_flow_counter {
inline constexpr Field kClear{0xc0, 1};
inline constexpr Field kNumOfCounters{0xc2, 30};
inline constexpr Field kFlowCounterId{0xe0, 32};
inline constexpr size_t kStatisticsByte = 0x10;
inline constexpr size_t kRecordBytes = 16;  // packets (8 B) then octets (8 B)
}  // namespace query_flow_counter

}  // namespace softverbs::devx::layout

#endif  // SOFTVERBS_DEVX_PRM_COMMAND_LAYOUTS_H_
