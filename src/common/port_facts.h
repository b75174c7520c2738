// What port 1 of softverbs0 reports, in one place: ibv_query_port fills its
// answer from PortAttributes() and the kernel view (common/kernel_view.h)
// writes its sysfs port files from the same values.
#pragma once

#include <infiniband/verbs.h>
#include <string.h>

#include <cstdint>

#include "common/device_limits.h"

namespace softverbs {

// The port's active MTU follows the interface's MTU as in rxe: the largest IB
// MTU that fits in it after the RoCE headers.
inline ibv_mtu MtuForInterface(uint32_t bytes) {
  if (bytes >= 4096 + 128) return IBV_MTU_4096;
  if (bytes >= 2048 + 128) return IBV_MTU_2048;
  if (bytes >= 1024 + 128) return IBV_MTU_1024;
  if (bytes >= 512 + 128) return IBV_MTU_512;
  return IBV_MTU_256;
}

inline constexpr uint32_t kPortCapFlags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;

// ibv_port_attr of port 1; only the active MTU depends on the host.
inline ibv_port_attr PortAttributes(ibv_mtu active_mtu) {
  ibv_port_attr a;
  memset(&a, 0, sizeof(a));
  a.state = IBV_PORT_ACTIVE;
  a.max_mtu = static_cast<ibv_mtu>(limits::kMaxMtu);
  a.active_mtu = active_mtu;
  a.gid_tbl_len = limits::kGidTableLength;
  a.port_cap_flags = kPortCapFlags;
  a.max_msg_sz = limits::kMaxMsgSize;
  a.pkey_tbl_len = limits::kMaxPkeys;
  a.max_vl_num = 1;
  a.active_width = limits::kActiveWidth;
  a.active_speed = limits::kActiveSpeed;
  a.phys_state = limits::kPhysStateLinkUp;
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
  return a;
}

}  // namespace softverbs
