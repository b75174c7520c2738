// Weak "not supported" definitions of every function libibverbs.so.1 exports.
//
// Debian's clients are linked with BIND_NOW, so every symbol listed in
// libibverbs.map must resolve when they load, whether or not softverbs
// implements it yet. Each definition here is WEAK: the real implementation in
// another .cc file of this library (a strong definition of the same name)
// replaces it at link time, with no registry to keep in sync. Whatever stays
// unimplemented fails honestly with EOPNOTSUPP in the calling convention the
// real libibverbs uses for that function (see docs/abi.md):
//   - int verbs that return an errno value  -> return EOPNOTSUPP (positive);
//   - int verbs documented as "-1 on error" -> errno = EOPNOTSUPP, return -1;
//   - pointer-returning verbs               -> errno = EOPNOTSUPP, return NULL;
//   - void functions                        -> do nothing.
//
// Parameter names are omitted on purpose: the stubs ignore their arguments.

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "abi/ibverbs/rdma_core_private.h"
#include "abi/not_supported.h"

// verbs.h turns these into inline wrappers; the exported symbols are the
// plain functions underneath.
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using softverbs::abi::ErrnoValueNotSupported;
using softverbs::abi::MinusOneNotSupported;
using softverbs::abi::NullNotSupported;

extern "C" {

// ---------------------------------------------------------------------------
// Device discovery, device context and port/GID/P_Key queries.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  if (num_devices != nullptr) *num_devices = 0;
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT void ibv_free_device_list(ibv_device**) {}
SOFTVERBS_WEAK_EXPORT const char* ibv_get_device_name(ibv_device*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT __be64 ibv_get_device_guid(ibv_device*) {
  errno = EOPNOTSUPP;
  return 0;
}
SOFTVERBS_WEAK_EXPORT int ibv_get_device_index(ibv_device*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_context* ibv_open_device(ibv_device*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_close_device(ibv_context*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_query_device(ibv_context*, ibv_device_attr*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_query_port(ibv_context*, uint8_t, _compat_ibv_port_attr*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_query_gid(ibv_context*, uint8_t, int, ibv_gid*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int _ibv_query_gid_ex(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*,
                                            uint32_t, size_t) {
  return ErrnoValueNotSupported();
}
// Returns the number of entries, or a negative errno value.
SOFTVERBS_WEAK_EXPORT ssize_t _ibv_query_gid_table(ibv_context*, ibv_gid_entry*, size_t, uint32_t,
                                                   size_t) {
  return -ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_query_gid_type(ibv_context*, uint8_t, unsigned int,
                                             ibv_gid_type_sysfs*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_query_pkey(ibv_context*, uint8_t, int, __be16*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_get_pkey_index(ibv_context*, uint8_t, __be16) {
  return MinusOneNotSupported();
}

// ---------------------------------------------------------------------------
// Asynchronous events.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT int ibv_get_async_event(ibv_context*, ibv_async_event*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT void ibv_ack_async_event(ibv_async_event*) {}

// ---------------------------------------------------------------------------
// Protection domains.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT ibv_pd* ibv_alloc_pd(ibv_context*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_dealloc_pd(ibv_pd*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// Memory regions and device memory.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT ibv_mr* ibv_reg_mr(ibv_pd*, void*, size_t, int) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd*, void*, size_t, uint64_t, int) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd*, void*, size_t, uint64_t, unsigned int) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return NullNotSupported();
}
// IBV_REREG_MR_ERR_INPUT: "old MR is still valid", the safe failure to report.
SOFTVERBS_WEAK_EXPORT int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) {
  ErrnoValueNotSupported();
  return IBV_REREG_MR_ERR_INPUT;
}
SOFTVERBS_WEAK_EXPORT int ibv_dereg_mr(ibv_mr*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// Completion channels and completion queues.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_cq* ibv_create_cq(ibv_context*, int, void*, ibv_comp_channel*, int) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_resize_cq(ibv_cq*, int) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_destroy_cq(ibv_cq*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_get_cq_event(ibv_comp_channel*, ibv_cq**, void**) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT void ibv_ack_cq_events(ibv_cq*, unsigned int) {}

// ---------------------------------------------------------------------------
// Shared receive queues.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT ibv_srq* ibv_create_srq(ibv_pd*, ibv_srq_init_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_modify_srq(ibv_srq*, ibv_srq_attr*, int) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_query_srq(ibv_srq*, ibv_srq_attr*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_destroy_srq(ibv_srq*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// Queue pairs.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT ibv_qp* ibv_create_qp(ibv_pd*, ibv_qp_init_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_modify_qp(ibv_qp*, ibv_qp_attr*, int) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_query_qp(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_destroy_qp(ibv_qp*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp*) {
  return NullNotSupported();
}
// 0 means "in-order placement not guaranteed", the conservative answer.
SOFTVERBS_WEAK_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) {
  return 0;
}
SOFTVERBS_WEAK_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// Address handles and multicast.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT ibv_ah* ibv_create_ah(ibv_pd*, ibv_ah_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_destroy_ah(ibv_ah*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_init_ah_from_wc(ibv_context*, uint8_t, ibv_wc*, ibv_grh*,
                                              ibv_ah_attr*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd*, ibv_wc*, ibv_grh*, uint8_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*,
                                                      uint8_t[ETHERNET_LL_SIZE], uint16_t*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// fork() protection.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT int ibv_fork_init(void) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_fork_status ibv_is_fork_initialized(void) {
  return IBV_FORK_DISABLED;
}
SOFTVERBS_WEAK_EXPORT int ibv_dontfork_range(void*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_dofork_range(void*, size_t) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// Enum-to-string and rate conversions. These cannot fail; the stubs give the
// answers the real library gives for a value it does not recognise.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT const char* ibv_node_type_str(ibv_node_type) {
  return "unknown";
}
SOFTVERBS_WEAK_EXPORT const char* ibv_port_state_str(ibv_port_state) {
  return "unknown";
}
SOFTVERBS_WEAK_EXPORT const char* ibv_event_type_str(ibv_event_type) {
  return "unknown";
}
SOFTVERBS_WEAK_EXPORT const char* ibv_wc_status_str(ibv_wc_status) {
  return "unknown";
}
SOFTVERBS_WEAK_EXPORT int ibv_rate_to_mult(ibv_rate) {
  return 0;
}
SOFTVERBS_WEAK_EXPORT ibv_rate mult_to_ibv_rate(int) {
  return IBV_RATE_MAX;
}
SOFTVERBS_WEAK_EXPORT int ibv_rate_to_mbps(ibv_rate) {
  return 0;
}
SOFTVERBS_WEAK_EXPORT ibv_rate mbps_to_ibv_rate(int) {
  return IBV_RATE_MAX;
}

// ---------------------------------------------------------------------------
// sysfs helpers (IBVERBS_1.0 legacy and IBVERBS_PRIVATE_34).
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT const char* ibv_get_sysfs_path(void) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_read_sysfs_file(const char*, const char*, char*, size_t) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_read_ibdev_sysfs_file(char*, size_t, verbs_sysfs_dev*, const char*,
                                                    ...) {
  return MinusOneNotSupported();
}

// ---------------------------------------------------------------------------
// Provider (driver) interface, IBVERBS_PRIVATE_34. Only rdma-core's own
// providers use these; ours do not, but Debian's libefa/libmlx5 import them
// when they are loaded next to our libibverbs.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT bool verbs_allow_disassociate_destroy = false;
SOFTVERBS_WEAK_EXPORT void ibv_register_driver(const char*, ibv_driver_init_func_1_1) {}
SOFTVERBS_WEAK_EXPORT void verbs_register_driver_34(const verbs_device_ops*) {}
SOFTVERBS_WEAK_EXPORT ibv_context* verbs_open_device(ibv_device*, void*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT void* _verbs_init_and_alloc_context(ibv_device*, int, size_t, verbs_context*,
                                                          uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT void verbs_uninit_context(verbs_context*) {}
SOFTVERBS_WEAK_EXPORT void verbs_set_ops(verbs_context*, const verbs_context_ops*) {}
SOFTVERBS_WEAK_EXPORT void verbs_init_cq(ibv_cq*, ibv_context*, ibv_comp_channel*, void*) {}
SOFTVERBS_WEAK_EXPORT void __verbs_log(verbs_context*, uint32_t, const char*, ...) {}
SOFTVERBS_WEAK_EXPORT int execute_ioctl(ibv_context*, ibv_command_buffer*) {
  return ErrnoValueNotSupported();
}
// Pure bookkeeping for sizing an ioctl attribute array; returning the
// caller's own count keeps any buffer it sizes from it at least that big.
SOFTVERBS_WEAK_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
                                                           ibv_command_buffer*) {
  return num_attrs;
}

// ---------------------------------------------------------------------------
// Provider command helpers ibv_cmd_*, IBVERBS_PRIVATE_34: the uverbs
// write/ioctl commands providers send to the kernel. All return an errno
// value except ibv_cmd_poll_cq, which returns a count or -1. The `void*`
// parameters stand for kern-abi.h command and response structs.
// ---------------------------------------------------------------------------
// Context and device.
SOFTVERBS_WEAK_EXPORT int ibv_cmd_get_context(verbs_context*, struct ibv_get_context*, size_t,
                                              ib_uverbs_get_context_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_query_context(ibv_context*, ibv_command_buffer*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_query_device_any(ibv_context*, const ibv_query_device_ex_input*,
                                                   ibv_device_attr_ex*, size_t,
                                                   ib_uverbs_ex_query_device_resp*, size_t*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_query_port(ibv_context*, uint8_t, ibv_port_attr*,
                                             struct ibv_query_port*, size_t) {
  return ErrnoValueNotSupported();
}
// Protection domains and XRC domains.
SOFTVERBS_WEAK_EXPORT int ibv_cmd_alloc_pd(ibv_context*, ibv_pd*, struct ibv_alloc_pd*, size_t,
                                           ib_uverbs_alloc_pd_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_dealloc_pd(ibv_pd*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_open_xrcd(ibv_context*, verbs_xrcd*, int, ibv_xrcd_init_attr*,
                                            struct ibv_open_xrcd*, size_t,
                                            ib_uverbs_open_xrcd_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_close_xrcd(verbs_xrcd*) {
  return ErrnoValueNotSupported();
}
// Memory regions, memory windows and device memory.
SOFTVERBS_WEAK_EXPORT int ibv_cmd_reg_mr(ibv_pd*, void*, size_t, uint64_t, int, verbs_mr*,
                                         struct ibv_reg_mr*, size_t, ib_uverbs_reg_mr_resp*,
                                         size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_rereg_mr(verbs_mr*, uint32_t, void*, size_t, uint64_t, int,
                                           ibv_pd*, struct ibv_rereg_mr*, size_t,
                                           ib_uverbs_rereg_mr_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_dereg_mr(verbs_mr*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_query_mr(ibv_pd*, verbs_mr*, uint32_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_advise_mr(ibv_pd*, enum ibv_advise_mr_advice, uint32_t, ibv_sge*,
                                            uint32_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int,
                                                verbs_mr*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_alloc_mw(ibv_pd*, ibv_mw_type, ibv_mw*, struct ibv_alloc_mw*,
                                           size_t, ib_uverbs_alloc_mw_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_dealloc_mw(ibv_mw*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_alloc_dm(ibv_context*, const ibv_alloc_dm_attr*, verbs_dm*,
                                           ibv_command_buffer*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_free_dm(verbs_dm*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_reg_dm_mr(ibv_pd*, verbs_dm*, uint64_t, size_t, unsigned int,
                                            verbs_mr*, ibv_command_buffer*) {
  return ErrnoValueNotSupported();
}
// Completion queues.
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_cq(ibv_context*, int, ibv_comp_channel*, int, ibv_cq*,
                                            struct ibv_create_cq*, size_t,
                                            ib_uverbs_create_cq_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_cq_ex(ibv_context*, const ibv_cq_init_attr_ex*, verbs_cq*,
                                               struct ibv_create_cq_ex*, size_t,
                                               ib_uverbs_ex_create_cq_resp*, size_t, uint32_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_poll_cq(ibv_cq*, int, ibv_wc*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_req_notify_cq(ibv_cq*, int) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_resize_cq(ibv_cq*, int, struct ibv_resize_cq*, size_t,
                                            ib_uverbs_resize_cq_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_destroy_cq(ibv_cq*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_modify_cq(ibv_cq*, ibv_modify_cq_attr*, struct ibv_modify_cq*,
                                            size_t) {
  return ErrnoValueNotSupported();
}
// Shared receive queues.
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_srq(ibv_pd*, ibv_srq*, ibv_srq_init_attr*,
                                             struct ibv_create_srq*, size_t,
                                             ib_uverbs_create_srq_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_srq_ex(ibv_context*, verbs_srq*, ibv_srq_init_attr_ex*,
                                                struct ibv_create_xsrq*, size_t,
                                                ib_uverbs_create_srq_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_modify_srq(ibv_srq*, ibv_srq_attr*, int, struct ibv_modify_srq*,
                                             size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_query_srq(ibv_srq*, ibv_srq_attr*, struct ibv_query_srq*,
                                            size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_destroy_srq(ibv_srq*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_post_srq_recv(ibv_srq*, ibv_recv_wr*, ibv_recv_wr**) {
  return ErrnoValueNotSupported();
}
// Queue pairs.
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_qp(ibv_pd*, ibv_qp*, ibv_qp_init_attr*,
                                            struct ibv_create_qp*, size_t,
                                            ib_uverbs_create_qp_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_qp_ex(ibv_context*, verbs_qp*, ibv_qp_init_attr_ex*,
                                               struct ibv_create_qp*, size_t,
                                               ib_uverbs_create_qp_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_qp_ex2(ibv_context*, verbs_qp*, ibv_qp_init_attr_ex*,
                                                struct ibv_create_qp_ex*, size_t,
                                                ib_uverbs_ex_create_qp_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_open_qp(ibv_context*, verbs_qp*, int, ibv_qp_open_attr*,
                                          struct ibv_open_qp*, size_t, ib_uverbs_create_qp_resp*,
                                          size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_query_qp(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*,
                                           struct ibv_query_qp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_modify_qp(ibv_qp*, ibv_qp_attr*, int, struct ibv_modify_qp*,
                                            size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_modify_qp_ex(ibv_qp*, ibv_qp_attr*, int, struct ibv_modify_qp_ex*,
                                               size_t, ib_uverbs_ex_modify_qp_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_destroy_qp(ibv_qp*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_post_send(ibv_qp*, ibv_send_wr*, ibv_send_wr**) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_post_recv(ibv_qp*, ibv_recv_wr*, ibv_recv_wr**) {
  return ErrnoValueNotSupported();
}
// Address handles and multicast.
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_ah(ibv_pd*, ibv_ah*, ibv_ah_attr*,
                                            ib_uverbs_create_ah_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_destroy_ah(ibv_ah*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  return ErrnoValueNotSupported();
}
// Flow steering and flow actions.
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_flow(ibv_qp*, ibv_flow*, ibv_flow_attr*, void*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_destroy_flow(ibv_flow*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_flow_action_esp(ibv_context*, ibv_flow_action_esp_attr*,
                                                         verbs_flow_action*, ibv_command_buffer*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_modify_flow_action_esp(verbs_flow_action*,
                                                         ibv_flow_action_esp_attr*,
                                                         ibv_command_buffer*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_destroy_flow_action(verbs_flow_action*) {
  return ErrnoValueNotSupported();
}
// Work queues and RSS indirection tables.
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_wq(ibv_context*, ibv_wq_init_attr*, ibv_wq*,
                                            struct ibv_create_wq*, size_t,
                                            ib_uverbs_ex_create_wq_resp*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_modify_wq(ibv_wq*, ibv_wq_attr*, struct ibv_modify_wq*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_destroy_wq(ibv_wq*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_rwq_ind_table(ibv_context*, ibv_rwq_ind_table_init_attr*,
                                                       ibv_rwq_ind_table*,
                                                       ib_uverbs_ex_create_rwq_ind_table_resp*,
                                                       size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_destroy_rwq_ind_table(ibv_rwq_ind_table*) {
  return ErrnoValueNotSupported();
}
// Counters.
SOFTVERBS_WEAK_EXPORT int ibv_cmd_create_counters(ibv_context*, ibv_counters_init_attr*,
                                                  verbs_counters*, ibv_command_buffer*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_destroy_counters(verbs_counters*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int ibv_cmd_read_counters(verbs_counters*, uint64_t*, uint32_t, uint32_t,
                                                ibv_command_buffer*) {
  return ErrnoValueNotSupported();
}

}  // extern "C"
