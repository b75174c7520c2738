// Field tables of the object contexts embedded in commands: cqc (§3.3),
// qpc and its address path (§3.4), mkc (§3.5). Offsets are in bits relative
// to the start of the context.
#ifndef SOFTVERBS_DEVX_PRM_CONTEXT_LAYOUTS_H_
#define SOFTVERBS_DEVX_PRM_CONTEXT_LAYOUTS_H_

#include <cstddef>

#include "prm_bits.h"

namespace softverbs::devx::layout {

namespace cqc {
inline constexpr Field kStatus{0x00, 4};
inline constexpr Field kDbrUmemValid{0x06, 1};
inline constexpr Field kCqeSz{0x08, 3};
inline constexpr Field kCc{0x0b, 1};
inline constexpr Field kOi{0x0e, 1};
inline constexpr Field kCqPeriodMode{0x0f, 2};
inline constexpr Field kCqeCompEn{0x11, 1};
inline constexpr Field kMiniCqeResFormat{0x12, 2};
inline constexpr Field kSt{0x14, 4};
inline constexpr Field kDbrUmemId{0x20, 32};
inline constexpr Field kPageOffset{0x54, 6};
inline constexpr Field kCqTimestampFormat{0x5e, 2};
inline constexpr Field kLogCqSize{0x63, 5};
inline constexpr Field kUarPage{0x68, 24};
inline constexpr Field kCqPeriod{0x84, 12};
inline constexpr Field kCqMaxCount{0x90, 16};
// Older headers: 8-bit c_eqn at DW5[7:0]; newer: 32-bit c_eqn_or_apu_element.
inline constexpr Field kCEqn{0xa0, 32};
inline constexpr Field kLogPageSize{0xc3, 5};
inline constexpr Field kLastNotifiedIndex{0x108, 24};
inline constexpr Field kLastSolicitIndex{0x128, 24};
inline constexpr Field kConsumerCounter{0x148, 24};
inline constexpr Field kProducerCounter{0x168, 24};
inline constexpr Field kDbrAddr{0x1c0, 64};
inline constexpr size_t kBytes = 64;
}  // namespace cqc

// Primary/secondary address path ("ads"), relative to the path's start.
namespace ads {
inline constexpr Field kFl{0x00, 1};
inline constexpr Field kFreeAr{0x01, 1};
inline constexpr Field kPkeyIndex{0x10, 16};
inline constexpr Field kGrh{0x28, 1};
inline constexpr Field kMlid{0x29, 7};
inline constexpr Field kRlid{0x30, 16};
inline constexpr Field kAckTimeout{0x40, 5};
inline constexpr Field kSrcAddrIndex{0x48, 8};
inline constexpr Field kStatRate{0x54, 4};
inline constexpr Field kHopLimit{0x58, 8};
inline constexpr Field kTclass{0x64, 8};
inline constexpr Field kFlowLabel{0x6c, 20};
inline constexpr Field kRgidRip{0x80, 128};
inline constexpr Field kEcn{0x108, 2};
inline constexpr Field kDscp{0x10a, 6};
inline constexpr Field kUdpSport{0x110, 16};
inline constexpr Field kEthPrio{0x121, 3};
inline constexpr Field kSl{0x124, 4};
inline constexpr Field kVhcaPortNum{0x128, 8};
inline constexpr Field kRmac{0x130, 48};
inline constexpr uint32_t kBits = 352;
}  // namespace ads

namespace qpc {
inline constexpr Field kState{0x00, 4};
inline constexpr Field kSt{0x08, 8};
inline constexpr Field kPmState{0x13, 2};
inline constexpr Field kPd{0x28, 24};
inline constexpr Field kMtu{0x40, 3};
inline constexpr Field kLogMsgMax{0x43, 5};
inline constexpr Field kLogRqSize{0x49, 4};
inline constexpr Field kLogRqStride{0x4d, 3};
inline constexpr Field kNoSq{0x50, 1};
inline constexpr Field kLogSqSize{0x51, 4};
inline constexpr Field kTsFormat{0x58, 2};
inline constexpr Field kCounterSetId{0x60, 8};
inline constexpr Field kUarPage{0x68, 24};
inline constexpr Field kSendDbrMode{0x80, 2};
inline constexpr Field kUserIndex{0x88, 24};
inline constexpr Field kLogPageSize{0xa3, 5};
inline constexpr Field kRemoteQpn{0xa8, 24};
inline constexpr Field kPrimaryAddressPath{0xc0, ads::kBits};
inline constexpr Field kSecondaryAddressPath{0x220, ads::kBits};
inline constexpr Field kLogAckReqFreq{0x380, 4};
inline constexpr Field kLogSraMax{0x388, 3};
inline constexpr Field kRetryCount{0x38d, 3};
inline constexpr Field kRnrRetry{0x390, 3};
inline constexpr Field kNextSendPsn{0x3c8, 24};
inline constexpr Field kCqnSnd{0x3e8, 24};
inline constexpr Field kLastAckedPsn{0x448, 24};
inline constexpr Field kLogRraMax{0x488, 3};
inline constexpr Field kAtomicMode{0x48c, 4};
inline constexpr Field kRre{0x490, 1};
inline constexpr Field kRwe{0x491, 1};
inline constexpr Field kRae{0x492, 1};
inline constexpr Field kPageOffset{0x494, 6};
inline constexpr Field kMinRnrNak{0x4a3, 5};
inline constexpr Field kNextRcvPsn{0x4a8, 24};
inline constexpr Field kXrcd{0x4c8, 24};
inline constexpr Field kCqnRcv{0x4e8, 24};
inline constexpr Field kDbrAddr{0x500, 64};
inline constexpr Field kQKey{0x540, 32};
inline constexpr Field kRqType{0x565, 3};
inline constexpr Field kSrqnRmpnXrqn{0x568, 24};
inline constexpr Field kHwSqWqebbCounter{0x5a0, 16};
inline constexpr Field kSwSqWqebbCounter{0x5b0, 16};
inline constexpr Field kHwRqCounter{0x5c0, 32};
inline constexpr Field kSwRqCounter{0x5e0, 32};
inline constexpr Field kDbrUmemValid{0x683, 1};
inline constexpr Field kDbrUmemId{0x720, 32};
inline constexpr size_t kBytes = 232;

// Fields of the primary path, addressed within the qpc.
inline constexpr Field kPrimaryPkeyIndex = ads::kPkeyIndex.At(kPrimaryAddressPath.offset);
inline constexpr Field kPrimaryAckTimeout = ads::kAckTimeout.At(kPrimaryAddressPath.offset);
inline constexpr Field kPrimaryVhcaPortNum = ads::kVhcaPortNum.At(kPrimaryAddressPath.offset);
}  // namespace qpc

// qpc.state values.
namespace qp_state {
inline constexpr uint32_t kRst = 0x0;
inline constexpr uint32_t kInit = 0x1;
inline constexpr uint32_t kRtr = 0x2;
inline constexpr uint32_t kRts = 0x3;
inline constexpr uint32_t kSqer = 0x4;
inline constexpr uint32_t kErr = 0x6;
inline constexpr uint32_t kSqd = 0x7;
}  // namespace qp_state

// qpc.st values this firmware accepts.
namespace qp_st {
inline constexpr uint32_t kRc = 0x0;
inline constexpr uint32_t kUc = 0x1;
inline constexpr uint32_t kUd = 0x2;
}  // namespace qp_st

// opt_param_mask bits of the QP transition commands (mlx5 "OPTPAR").
namespace qp_optpar {
inline constexpr uint32_t kAltAddrPath = 1u << 0;
inline constexpr uint32_t kRre = 1u << 1;
inline constexpr uint32_t kRae = 1u << 2;
inline constexpr uint32_t kRwe = 1u << 3;
inline constexpr uint32_t kPkeyIndex = 1u << 4;
inline constexpr uint32_t kQKey = 1u << 5;
inline constexpr uint32_t kRnrTimeout = 1u << 6;
inline constexpr uint32_t kPrimaryAddrPath = 1u << 7;
inline constexpr uint32_t kSraMax = 1u << 8;
inline constexpr uint32_t kRraMax = 1u << 9;
inline constexpr uint32_t kPmState = 1u << 10;
inline constexpr uint32_t kRetryCount = 1u << 12;
inline constexpr uint32_t kRnrRetry = 1u << 13;
inline constexpr uint32_t kAckTimeout = 1u << 14;
inline constexpr uint32_t kPriPort = 1u << 16;
}  // namespace qp_optpar

namespace mkc {
inline constexpr Field kFree{0x01, 1};
inline constexpr Field kAccessMode4To2{0x03, 3};
inline constexpr Field kUmrEn{0x10, 1};
inline constexpr Field kA{0x11, 1};
inline constexpr Field kRw{0x12, 1};
inline constexpr Field kRr{0x13, 1};
inline constexpr Field kLw{0x14, 1};
inline constexpr Field kLr{0x15, 1};
inline constexpr Field kAccessMode1To0{0x16, 2};
inline constexpr Field kQpn{0x20, 24};
inline constexpr Field kMkey7To0{0x38, 8};
inline constexpr Field kLength64{0x60, 1};
inline constexpr Field kPd{0x68, 24};
inline constexpr Field kStartAddr = ByteField(0x10, 8);
inline constexpr Field kLen = ByteField(0x18, 8);
inline constexpr Field kTranslationsOctwordSize{0x1a0, 32};
inline constexpr Field kLogPageSize{0x1db, 5};
inline constexpr size_t kBytes = 64;
}  // namespace mkc

// mkc access modes (access_mode_4_2 << 2 | access_mode_1_0).
namespace mkey_access_mode {
inline constexpr uint32_t kPa = 0;
inline constexpr uint32_t kMtt = 1;
inline constexpr uint32_t kKlm = 2;
inline constexpr uint32_t kKsm = 3;
}  // namespace mkey_access_mode

}  // namespace softverbs::devx::layout

#endif  // SOFTVERBS_DEVX_PRM_CONTEXT_LAYOUTS_H_
