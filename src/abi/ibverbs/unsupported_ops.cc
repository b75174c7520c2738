#include "abi/ibverbs/unsupported_ops.h"

#include <errno.h>

#include <algorithm>
#include <cstddef>

#include "abi/ibverbs/reject.h"

namespace softverbs::provider {
namespace {

// The verb an op serves, as a template argument: each slot gets its own
// answer, which names the verb on the log channel.
template <size_t N>
struct VerbName {
  char text[N];
  constexpr VerbName(const char (&s)[N]) { std::copy_n(s, N, text); }
};

// Answers for each shape of op: int-returning ops return EOPNOTSUPP (the
// positive errno convention of libibverbs), pointer-returning ops NULL with
// errno set. Both say "<verb> is not supported by softverbs".
template <VerbName verb, typename... Args>
int NotSupported(Args...) {
  return Reject(EOPNOTSUPP, "%s is not supported by softverbs", verb.text);
}

template <VerbName verb, typename T, typename... Args>
T* NotSupportedNull(Args...) {
  return RejectNull(EOPNOTSUPP, "%s is not supported by softverbs", verb.text);
}

// The pre-1.1 slots no header reaches any more.
void* CompatNotSupported() {
  return RejectNull(EOPNOTSUPP, "a libibverbs 1.0 compatibility op is not supported by softverbs");
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
  ops._compat_query_device =
      NotSupported<"ibv_query_device (compat op)", ibv_context*, ibv_device_attr*>;
  ops._compat_query_port =
      NotSupported<"ibv_query_port (compat op)", ibv_context*, uint8_t, _compat_ibv_port_attr*>;
  ops.poll_cq = NotSupported<"ibv_poll_cq", ibv_cq*, int, ibv_wc*>;
  ops.req_notify_cq = NotSupported<"ibv_req_notify_cq", ibv_cq*, int>;
  ops.post_srq_recv = NotSupported<"ibv_post_srq_recv", ibv_srq*, ibv_recv_wr*, ibv_recv_wr**>;
  ops.post_send = NotSupported<"ibv_post_send", ibv_qp*, ibv_send_wr*, ibv_send_wr**>;
  ops.post_recv = NotSupported<"ibv_post_recv", ibv_qp*, ibv_recv_wr*, ibv_recv_wr**>;

  v->query_port = NotSupported<"ibv_query_port", ibv_context*, uint8_t, ibv_port_attr*, size_t>;
  v->advise_mr =
      NotSupported<"ibv_advise_mr", ibv_pd*, ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t>;
  v->alloc_null_mr = NotSupportedNull<"ibv_alloc_null_mr", ibv_mr, ibv_pd*>;
  v->read_counters =
      NotSupported<"ibv_read_counters", ibv_counters*, uint64_t*, uint32_t, uint32_t>;
  v->attach_counters_point_flow = NotSupported<"ibv_attach_counters_point_flow", ibv_counters*,
                                               ibv_counter_attach_attr*, ibv_flow*>;
  v->create_counters =
      NotSupportedNull<"ibv_create_counters", ibv_counters, ibv_context*, ibv_counters_init_attr*>;
  v->destroy_counters = NotSupported<"ibv_destroy_counters", ibv_counters*>;
  v->reg_dm_mr =
      NotSupportedNull<"ibv_reg_dm_mr", ibv_mr, ibv_pd*, ibv_dm*, uint64_t, size_t, unsigned int>;
  v->alloc_dm = NotSupportedNull<"ibv_alloc_dm", ibv_dm, ibv_context*, ibv_alloc_dm_attr*>;
  v->free_dm = NotSupported<"ibv_free_dm", ibv_dm*>;
  v->modify_flow_action_esp =
      NotSupported<"ibv_modify_flow_action_esp", ibv_flow_action*, ibv_flow_action_esp_attr*>;
  v->destroy_flow_action = NotSupported<"ibv_destroy_flow_action", ibv_flow_action*>;
  v->create_flow_action_esp = NotSupportedNull<"ibv_create_flow_action_esp", ibv_flow_action,
                                               ibv_context*, ibv_flow_action_esp_attr*>;
  v->modify_qp_rate_limit =
      NotSupported<"ibv_modify_qp_rate_limit", ibv_qp*, ibv_qp_rate_limit_attr*>;
  v->alloc_parent_domain = NotSupportedNull<"ibv_alloc_parent_domain", ibv_pd, ibv_context*,
                                            ibv_parent_domain_init_attr*>;
  v->dealloc_td = NotSupported<"ibv_dealloc_td", ibv_td*>;
  v->alloc_td = NotSupportedNull<"ibv_alloc_td", ibv_td, ibv_context*, ibv_td_init_attr*>;
  v->modify_cq = NotSupported<"ibv_modify_cq", ibv_cq*, ibv_modify_cq_attr*>;
  v->post_srq_ops = NotSupported<"ibv_post_srq_ops", ibv_srq*, ibv_ops_wr*, ibv_ops_wr**>;
  v->query_rt_values = NotSupported<"ibv_query_rt_values_ex", ibv_context*, ibv_values_ex*>;
  v->create_cq_ex =
      NotSupportedNull<"ibv_create_cq_ex", ibv_cq_ex, ibv_context*, ibv_cq_init_attr_ex*>;
  v->priv = nullptr;
  v->query_device_ex = NotSupported<"ibv_query_device_ex", ibv_context*,
                                    const ibv_query_device_ex_input*, ibv_device_attr_ex*, size_t>;
  v->open_qp = NotSupportedNull<"ibv_open_qp", ibv_qp, ibv_context*, ibv_qp_open_attr*>;
  v->create_qp_ex =
      NotSupportedNull<"ibv_create_qp_ex", ibv_qp, ibv_context*, ibv_qp_init_attr_ex*>;
  v->get_srq_num = NotSupported<"ibv_get_srq_num", ibv_srq*, uint32_t*>;
  v->create_srq_ex =
      NotSupportedNull<"ibv_create_srq_ex", ibv_srq, ibv_context*, ibv_srq_init_attr_ex*>;
  v->open_xrcd = NotSupportedNull<"ibv_open_xrcd", ibv_xrcd, ibv_context*, ibv_xrcd_init_attr*>;
  v->close_xrcd = NotSupported<"ibv_close_xrcd", ibv_xrcd*>;
}

}  // namespace softverbs::provider
