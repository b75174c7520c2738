#include "protocol/messages.h"

namespace softverbs::protocol {

const char* OpName(Op op) {
  static constexpr const char* kNames[] = {"?",
                                           "hello",
                                           "alloc_pd",
                                           "dealloc_pd",
                                           "reg_mr",
                                           "dereg_mr",
                                           "rereg_mr",
                                           "create_cq",
                                           "resize_cq",
                                           "destroy_cq",
                                           "create_srq",
                                           "modify_srq",
                                           "query_srq",
                                           "destroy_srq",
                                           "create_qp",
                                           "modify_qp",
                                           "query_qp",
                                           "destroy_qp",
                                           "open_qp",
                                           "create_ah",
                                           "destroy_ah",
                                           "attach_mcast",
                                           "detach_mcast",
                                           "open_xrcd",
                                           "close_xrcd",
                                           "status",
                                           "shutdown",
                                           "devx_open",
                                           "devx_command",
                                           "devx_destroy",
                                           "devx_umem_reg",
                                           "devx_umem_dereg",
                                           "reg_mr_backed",
                                           "map_qp",
                                           "map_mr",
                                           "qp_error",
                                           "srq_limit_reached",
                                           "mcast_members",
                                           "map_srq",
                                           "qp_event",
                                           "alloc_dm",
                                           "free_dm",
                                           "reg_dm_mr"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(Op::kCount));
  auto i = static_cast<size_t>(op);
  return i < static_cast<size_t>(Op::kCount) ? kNames[i] : "?";
}

}  // namespace softverbs::protocol
