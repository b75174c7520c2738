// Printable names of QP states, QP types, attribute-mask bits and MTUs, as
// rdma-core spells them. Used in modify-check explanations and by
// `softverbs status`.
#ifndef SOFTVERBS_VERBS_QP_NAMES_H_
#define SOFTVERBS_VERBS_QP_NAMES_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace softverbs::verbs {

// The legacy OFED 1.x XRC send QP type (IBV_QPT_XRC). rdma-core's header no
// longer defines it, but legacy applications still pass it.
inline constexpr ibv_qp_type kLegacyQptXrc = static_cast<ibv_qp_type>(5);

// mlx5's dynamically connected QPs (mlx5dv_create_qp with
// MLX5DV_QP_INIT_ATTR_MASK_DC) are IBV_QPT_DRIVER to the application and one
// of these two types inside softverbs - the device, its tables, the data
// path - as XRC's initiator and target are two types. Below 32: the data
// path keeps sets of QP types as bit masks (datapath/opcodes.h).
inline constexpr ibv_qp_type kQptDcIni = static_cast<ibv_qp_type>(20);  // DCI: the requester
inline constexpr ibv_qp_type kQptDcTgt = static_cast<ibv_qp_type>(21);  // DCT: the responder

// The type the application sees for a QP the device knows as `type`.
inline constexpr ibv_qp_type PublicQpType(ibv_qp_type type) {
  return type == kQptDcIni || type == kQptDcTgt ? IBV_QPT_DRIVER : type;
}

// "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN" (IBV_QPS_UNKNOWN
// and any out-of-range value).
std::string_view QpStateName(ibv_qp_state state);

// "RC", "UC", "UD", "XRC" (legacy, 5), "RAW_PACKET", "XRC_SEND", "XRC_RECV",
// "DRIVER", "DCI", "DCT"; "UNKNOWN" for any other value.
std::string_view QpTypeName(ibv_qp_type type);

// Name of one ibv_qp_attr_mask bit, e.g. "IBV_QP_PORT"; empty if `bit` is not
// exactly one known bit.
std::string_view QpAttrMaskBitName(uint32_t bit);

// All bits of `mask`, lowest first, joined by '|': "IBV_QP_STATE|IBV_QP_PORT".
// Unknown bits are printed in hex ("0x200000"); an empty mask prints "0".
std::string QpAttrMaskToString(uint32_t mask);

// Bytes of an ibv_mtu value: "256" ... "4096"; "invalid" outside 1..5.
std::string_view MtuName(ibv_mtu mtu);

}  // namespace softverbs::verbs

#endif  // SOFTVERBS_VERBS_QP_NAMES_H_
