#include "abi/ibverbs/unsupported_ops.h"

#include <errno.h>

namespace softverbs::provider {
namespace {

// Answers for each shape of op: int-returning ops return EOPNOTSUPP (the
// positive errno convention of libibverbs), pointer-returning ops NULL with
// errno set.
template <typename... Args>
int NotSupported(Args...) {
  return EOPNOTSUPP;
}

template <typename T, typename... Args>
T* NotSupportedNull(Args...) {
  errno = EOPNOTSUPP;
  return nullptr;
}

void* CompatNotSupported() {
  errno = EOPNOTSUPP;
  return nullptr;
}

}  // namespace

void InstallUnsupportedOps(verbs_context* v) {
  ibv_context_ops& ops = v->context.ops;
  ops._compat_alloc_pd = ops._compat_dealloc_pd = ops._compat_reg_mr = ops._compat_rereg_mr =
      ops._compat_dereg_mr = ops._compat_create_cq = ops._compat_cq_event = ops._compat_resize_cq =
          ops._compat_destroy_cq = ops._compat_create_srq = ops._compat_modify_srq =
              ops._compat_query_srq = ops._compat_destroy_srq = ops._compat_create_qp =
                  ops._compat_query_qp = ops._compat_modify_qp = ops._compat_destroy_qp =
                      ops._compat_create_ah = ops._compat_destroy_ah = ops._compat_attach_mcast =
                          ops._compat_detach_mcast = ops._compat_async_event = CompatNotSupported;
  ops._compat_query_device = NotSupported<ibv_context*, ibv_device_attr*>;
  ops._compat_query_port = NotSupported<ibv_context*, uint8_t, _compat_ibv_port_attr*>;
  // Memory windows are not implemented (max_mw is 0).
  ops.alloc_mw = NotSupportedNull<ibv_mw, ibv_pd*, ibv_mw_type>;
  ops.bind_mw = NotSupported<ibv_qp*, ibv_mw*, ibv_mw_bind*>;
  ops.dealloc_mw = NotSupported<ibv_mw*>;
  ops.poll_cq = NotSupported<ibv_cq*, int, ibv_wc*>;
  ops.req_notify_cq = NotSupported<ibv_cq*, int>;
  ops.post_srq_recv = NotSupported<ibv_srq*, ibv_recv_wr*, ibv_recv_wr**>;
  ops.post_send = NotSupported<ibv_qp*, ibv_send_wr*, ibv_send_wr**>;
  ops.post_recv = NotSupported<ibv_qp*, ibv_recv_wr*, ibv_recv_wr**>;

  v->query_port = NotSupported<ibv_context*, uint8_t, ibv_port_attr*, size_t>;
  v->advise_mr = NotSupported<ibv_pd*, ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t>;
  v->alloc_null_mr = NotSupportedNull<ibv_mr, ibv_pd*>;
  v->read_counters = NotSupported<ibv_counters*, uint64_t*, uint32_t, uint32_t>;
  v->attach_counters_point_flow = NotSupported<ibv_counters*, ibv_counter_attach_attr*, ibv_flow*>;
  v->create_counters = NotSupportedNull<ibv_counters, ibv_context*, ibv_counters_init_attr*>;
  v->destroy_counters = NotSupported<ibv_counters*>;
  v->reg_dm_mr = NotSupportedNull<ibv_mr, ibv_pd*, ibv_dm*, uint64_t, size_t, unsigned int>;
  v->alloc_dm = NotSupportedNull<ibv_dm, ibv_context*, ibv_alloc_dm_attr*>;
  v->free_dm = NotSupported<ibv_dm*>;
  v->modify_flow_action_esp = NotSupported<ibv_flow_action*, ibv_flow_action_esp_attr*>;
  v->destroy_flow_action = NotSupported<ibv_flow_action*>;
  v->create_flow_action_esp =
      NotSupportedNull<ibv_flow_action, ibv_context*, ibv_flow_action_esp_attr*>;
  v->modify_qp_rate_limit = NotSupported<ibv_qp*, ibv_qp_rate_limit_attr*>;
  v->alloc_parent_domain = NotSupportedNull<ibv_pd, ibv_context*, ibv_parent_domain_init_attr*>;
  v->dealloc_td = NotSupported<ibv_td*>;
  v->alloc_td = NotSupportedNull<ibv_td, ibv_context*, ibv_td_init_attr*>;
  v->modify_cq = NotSupported<ibv_cq*, ibv_modify_cq_attr*>;
  v->post_srq_ops = NotSupported<ibv_srq*, ibv_ops_wr*, ibv_ops_wr**>;
  v->destroy_rwq_ind_table = NotSupported<ibv_rwq_ind_table*>;
  v->create_rwq_ind_table =
      NotSupportedNull<ibv_rwq_ind_table, ibv_context*, ibv_rwq_ind_table_init_attr*>;
  v->destroy_wq = NotSupported<ibv_wq*>;
  v->modify_wq = NotSupported<ibv_wq*, ibv_wq_attr*>;
  v->create_wq = NotSupportedNull<ibv_wq, ibv_context*, ibv_wq_init_attr*>;
  v->query_rt_values = NotSupported<ibv_context*, ibv_values_ex*>;
  v->create_cq_ex = NotSupportedNull<ibv_cq_ex, ibv_context*, ibv_cq_init_attr_ex*>;
  v->priv = nullptr;
  v->query_device_ex =
      NotSupported<ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*, size_t>;
  v->ibv_destroy_flow = NotSupported<ibv_flow*>;
  v->ibv_create_flow = NotSupportedNull<ibv_flow, ibv_qp*, ibv_flow_attr*>;
  v->open_qp = NotSupportedNull<ibv_qp, ibv_context*, ibv_qp_open_attr*>;
  v->create_qp_ex = NotSupportedNull<ibv_qp, ibv_context*, ibv_qp_init_attr_ex*>;
  v->get_srq_num = NotSupported<ibv_srq*, uint32_t*>;
  v->create_srq_ex = NotSupportedNull<ibv_srq, ibv_context*, ibv_srq_init_attr_ex*>;
  v->open_xrcd = NotSupportedNull<ibv_xrcd, ibv_context*, ibv_xrcd_init_attr*>;
  v->close_xrcd = NotSupported<ibv_xrcd*>;
}

}  // namespace softverbs::provider
