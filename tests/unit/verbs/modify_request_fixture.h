// A modify request whose every attribute value is acceptable under kLimits, so
// a test can turn on any mask bit and change only the field it is about.
#ifndef SOFTVERBS_TESTS_UNIT_VERBS_MODIFY_REQUEST_FIXTURE_H_
#define SOFTVERBS_TESTS_UNIT_VERBS_MODIFY_REQUEST_FIXTURE_H_

#include <infiniband/verbs.h>

#include "verbs/qp_modify_check.h"

namespace softverbs::verbs::fixtures {

inline constexpr DeviceLimits kDeviceLimits{
    .phys_port_cnt = 1, .max_qp_rd_atom = 16, .max_qp_init_rd_atom = 8};

inline constexpr PortLimits kRocePort{.pkey_table_len = 1,
                                      .gid_table_len = 4,
                                      .max_mtu = IBV_MTU_1024,
                                      .link_layer = IBV_LINK_LAYER_ETHERNET};

inline ibv_ah_attr ValidAddressVector() {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.grh.sgid_index = 0;
  ah.grh.hop_limit = 64;
  ah.port_num = 1;
  return ah;
}

inline ibv_qp_attr ValidAttr() {
  ibv_qp_attr attr{};
  attr.path_mtu = IBV_MTU_1024;
  attr.path_mig_state = IBV_MIG_MIGRATED;
  attr.qkey = 0x11111111;
  attr.rq_psn = 0x123456;
  attr.sq_psn = 0x654321;
  attr.dest_qp_num = 0x42;
  attr.qp_access_flags =
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  attr.ah_attr = ValidAddressVector();
  attr.alt_ah_attr = ValidAddressVector();
  attr.pkey_index = 0;
  attr.alt_pkey_index = 0;
  attr.max_rd_atomic = 8;
  attr.max_dest_rd_atomic = 16;
  attr.min_rnr_timer = 12;
  attr.port_num = 1;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.alt_port_num = 1;
  attr.alt_timeout = 14;
  return attr;
}

}  // namespace softverbs::verbs::fixtures

#endif  // SOFTVERBS_TESTS_UNIT_VERBS_MODIFY_REQUEST_FIXTURE_H_
