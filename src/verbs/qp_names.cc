#include "verbs/qp_names.h"

#include <array>
#include <cstdio>

namespace softverbs::verbs {
namespace {

struct MaskBitName {
  uint32_t bit;
  std::string_view name;
};

// Every bit of enum ibv_qp_attr_mask in rdma-core 44, in bit order. Bits 21-24
// (the old kernel SMAC/VID bits) were never exposed by libibverbs.
constexpr std::array kMaskBitNames = {
    MaskBitName{IBV_QP_STATE, "IBV_QP_STATE"},
    MaskBitName{IBV_QP_CUR_STATE, "IBV_QP_CUR_STATE"},
    MaskBitName{IBV_QP_EN_SQD_ASYNC_NOTIFY, "IBV_QP_EN_SQD_ASYNC_NOTIFY"},
    MaskBitName{IBV_QP_ACCESS_FLAGS, "IBV_QP_ACCESS_FLAGS"},
    MaskBitName{IBV_QP_PKEY_INDEX, "IBV_QP_PKEY_INDEX"},
    MaskBitName{IBV_QP_PORT, "IBV_QP_PORT"},
    MaskBitName{IBV_QP_QKEY, "IBV_QP_QKEY"},
    MaskBitName{IBV_QP_AV, "IBV_QP_AV"},
    MaskBitName{IBV_QP_PATH_MTU, "IBV_QP_PATH_MTU"},
    MaskBitName{IBV_QP_TIMEOUT, "IBV_QP_TIMEOUT"},
    MaskBitName{IBV_QP_RETRY_CNT, "IBV_QP_RETRY_CNT"},
    MaskBitName{IBV_QP_RNR_RETRY, "IBV_QP_RNR_RETRY"},
    MaskBitName{IBV_QP_RQ_PSN, "IBV_QP_RQ_PSN"},
    MaskBitName{IBV_QP_MAX_QP_RD_ATOMIC, "IBV_QP_MAX_QP_RD_ATOMIC"},
    MaskBitName{IBV_QP_ALT_PATH, "IBV_QP_ALT_PATH"},
    MaskBitName{IBV_QP_MIN_RNR_TIMER, "IBV_QP_MIN_RNR_TIMER"},
    MaskBitName{IBV_QP_SQ_PSN, "IBV_QP_SQ_PSN"},
    MaskBitName{IBV_QP_MAX_DEST_RD_ATOMIC, "IBV_QP_MAX_DEST_RD_ATOMIC"},
    MaskBitName{IBV_QP_PATH_MIG_STATE, "IBV_QP_PATH_MIG_STATE"},
    MaskBitName{IBV_QP_CAP, "IBV_QP_CAP"},
    MaskBitName{IBV_QP_DEST_QPN, "IBV_QP_DEST_QPN"},
    MaskBitName{IBV_QP_RATE_LIMIT, "IBV_QP_RATE_LIMIT"},
};

}  // namespace

std::string_view QpStateName(ibv_qp_state state) {
  switch (state) {
    case IBV_QPS_RESET:
      return "RESET";
    case IBV_QPS_INIT:
      return "INIT";
    case IBV_QPS_RTR:
      return "RTR";
    case IBV_QPS_RTS:
      return "RTS";
    case IBV_QPS_SQD:
      return "SQD";
    case IBV_QPS_SQE:
      return "SQE";
    case IBV_QPS_ERR:
      return "ERR";
    case IBV_QPS_UNKNOWN:
      break;
  }
  return "UNKNOWN";
}

std::string_view QpTypeName(ibv_qp_type type) {
  if (type == kLegacyQptXrc) return "XRC";
  if (type == kQptDcIni) return "DCI";
  if (type == kQptDcTgt) return "DCT";
  switch (type) {
    case IBV_QPT_RC:
      return "RC";
    case IBV_QPT_UC:
      return "UC";
    case IBV_QPT_UD:
      return "UD";
    case IBV_QPT_RAW_PACKET:
      return "RAW_PACKET";
    case IBV_QPT_XRC_SEND:
      return "XRC_SEND";
    case IBV_QPT_XRC_RECV:
      return "XRC_RECV";
    case IBV_QPT_DRIVER:
      return "DRIVER";
  }
  return "UNKNOWN";
}

std::string_view QpAttrMaskBitName(uint32_t bit) {
  for (const MaskBitName& entry : kMaskBitNames) {
    if (entry.bit == bit) return entry.name;
  }
  return {};
}

std::string QpAttrMaskToString(uint32_t mask) {
  if (mask == 0) return "0";
  std::string out;
  for (uint32_t bit = 1; bit != 0; bit <<= 1) {
    if ((mask & bit) == 0) continue;
    if (!out.empty()) out += '|';
    std::string_view name = QpAttrMaskBitName(bit);
    if (!name.empty()) {
      out += name;
    } else {
      char hex[16];
      std::snprintf(hex, sizeof(hex), "0x%x", bit);
      out += hex;
    }
  }
  return out;
}

std::string_view MtuName(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256:
      return "256";
    case IBV_MTU_512:
      return "512";
    case IBV_MTU_1024:
      return "1024";
    case IBV_MTU_2048:
      return "2048";
    case IBV_MTU_4096:
      return "4096";
  }
  return "invalid";
}

}  // namespace softverbs::verbs
