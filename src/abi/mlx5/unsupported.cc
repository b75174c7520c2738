// Weak "not supported" definitions of every function libmlx5.so.1 exports.
//
// Debian's clients (pyverbs, perftest, UCX) are linked with BIND_NOW, so every
// symbol in mlx5.map must resolve when they load. Each definition here is
// WEAK: a real implementation in another .cc file of this library (e.g. the
// DEVX emulation) is a strong definition of the same name and replaces it at
// link time. What stays unimplemented fails honestly with EOPNOTSUPP in the
// convention the mlx5dv man pages give (see docs/abi.md):
//   - int functions return the errno value (positive EOPNOTSUPP), except
//     mlx5dv_devx_get_event / mlx5dv_vfio_get_events_fd (-1 + errno);
//   - pointer-returning functions set errno and return NULL;
//   - void functions do nothing; mlx5dv_is_supported() answers false.
//
// Parameter names are omitted on purpose: the stubs ignore their arguments.

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "abi/not_supported.h"

using softverbs::abi::ErrnoValueNotSupported;
using softverbs::abi::MinusOneNotSupported;
using softverbs::abi::NullNotSupported;

extern "C" {

// ---------------------------------------------------------------------------
// Device, context and port queries.
// ---------------------------------------------------------------------------
// No softverbs device is an mlx5 device until the DEVX emulation says so.
SOFTVERBS_WEAK_EXPORT bool mlx5dv_is_supported(ibv_device*) {
  return false;
}
SOFTVERBS_WEAK_EXPORT ibv_context* mlx5dv_open_device(ibv_device*, mlx5dv_context_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_query_device(ibv_context*, mlx5dv_context*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int _mlx5dv_query_port(ibv_context*, uint32_t, mlx5dv_port*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_set_context_attr(ibv_context*, mlx5dv_set_ctx_attr_type, void*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_get_clock_info(ibv_context*, mlx5dv_clock_info*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_init_obj(mlx5dv_obj*, uint64_t) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// VFIO (user-space PCI) driver mode.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT ibv_device** mlx5dv_get_vfio_device_list(mlx5dv_vfio_context_attr*) {
  return NullNotSupported();
}
// Returns -1 and sets errno (man page).
SOFTVERBS_WEAK_EXPORT int mlx5dv_vfio_get_events_fd(ibv_context*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_vfio_process_events(ibv_context*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// Verbs objects with mlx5 attributes, and QP controls.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT ibv_cq_ex* mlx5dv_create_cq(ibv_context*, ibv_cq_init_attr_ex*,
                                                  mlx5dv_cq_init_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_qp* mlx5dv_create_qp(ibv_context*, ibv_qp_init_attr_ex*,
                                               mlx5dv_qp_init_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_wq* mlx5dv_create_wq(ibv_context*, ibv_wq_init_attr*,
                                               mlx5dv_wq_init_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_qp_ex* mlx5dv_qp_ex_from_ibv_qp_ex(ibv_qp_ex*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_modify_qp_lag_port(ibv_qp*, uint8_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_query_qp_lag_port(ibv_qp*, uint8_t*, uint8_t*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_modify_qp_udp_sport(ibv_qp*, uint16_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_modify_qp_sched_elem(ibv_qp*, const mlx5dv_sched_leaf*,
                                                      const mlx5dv_sched_leaf*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_map_ah_to_qp(ibv_ah*, uint32_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_reserved_qpn_alloc(ibv_context*, uint32_t*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_reserved_qpn_dealloc(ibv_context*, uint32_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_dm* mlx5dv_alloc_dm(ibv_context*, ibv_alloc_dm_attr*,
                                              mlx5dv_alloc_dm_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT void* mlx5dv_dm_map_op_addr(ibv_dm*, uint8_t) {
  return NullNotSupported();
}

// ---------------------------------------------------------------------------
// Crypto login and data-encryption keys (memory keys: mkey.cc).
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT int mlx5dv_crypto_login(ibv_context*, mlx5dv_crypto_login_attr*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_crypto_login_query_state(ibv_context*,
                                                          mlx5dv_crypto_login_state*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_crypto_logout(ibv_context*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_crypto_login_obj* mlx5dv_crypto_login_create(
    ibv_context*, mlx5dv_crypto_login_attr_ex*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_crypto_login_query(mlx5dv_crypto_login_obj*,
                                                    mlx5dv_crypto_login_query_attr*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_crypto_login_destroy(mlx5dv_crypto_login_obj*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dek* mlx5dv_dek_create(ibv_context*, mlx5dv_dek_init_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dek_query(mlx5dv_dek*, mlx5dv_dek_attr*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dek_destroy(mlx5dv_dek*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// DEVX: general commands and device objects.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_general_cmd(ibv_context*, const void*, size_t, void*,
                                                  size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_devx_obj* mlx5dv_devx_obj_create(ibv_context*, const void*, size_t,
                                                              void*, size_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_obj_query(mlx5dv_devx_obj*, const void*, size_t, void*,
                                                size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_obj_modify(mlx5dv_devx_obj*, const void*, size_t, void*,
                                                 size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_obj_destroy(mlx5dv_devx_obj*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_query_eqn(ibv_context*, uint32_t, uint32_t*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// DEVX: commands on objects created through verbs.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_cq_query(ibv_cq*, const void*, size_t, void*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_cq_modify(ibv_cq*, const void*, size_t, void*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_qp_query(ibv_qp*, const void*, size_t, void*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_qp_modify(ibv_qp*, const void*, size_t, void*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_srq_query(ibv_srq*, const void*, size_t, void*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_srq_modify(ibv_srq*, const void*, size_t, void*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_wq_query(ibv_wq*, const void*, size_t, void*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_wq_modify(ibv_wq*, const void*, size_t, void*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_ind_tbl_query(ibv_rwq_ind_table*, const void*, size_t, void*,
                                                    size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_ind_tbl_modify(ibv_rwq_ind_table*, const void*, size_t, void*,
                                                     size_t) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// DEVX: UAR pages and user memory registration.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT mlx5dv_devx_uar* mlx5dv_devx_alloc_uar(ibv_context*, uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT void mlx5dv_devx_free_uar(mlx5dv_devx_uar*) {}
SOFTVERBS_WEAK_EXPORT mlx5dv_devx_umem* mlx5dv_devx_umem_reg(ibv_context*, void*, size_t,
                                                             uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_devx_umem* mlx5dv_devx_umem_reg_ex(ibv_context*,
                                                                mlx5dv_devx_umem_in*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_umem_dereg(mlx5dv_devx_umem*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// DEVX: asynchronous commands and events.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT mlx5dv_devx_cmd_comp* mlx5dv_devx_create_cmd_comp(ibv_context*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT void mlx5dv_devx_destroy_cmd_comp(mlx5dv_devx_cmd_comp*) {}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_obj_query_async(mlx5dv_devx_obj*, const void*, size_t, size_t,
                                                      uint64_t, mlx5dv_devx_cmd_comp*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_get_async_cmd_comp(mlx5dv_devx_cmd_comp*,
                                                         mlx5dv_devx_async_cmd_hdr*, size_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_devx_event_channel* mlx5dv_devx_create_event_channel(
    ibv_context*, mlx5dv_devx_create_event_channel_flags) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT void mlx5dv_devx_destroy_event_channel(mlx5dv_devx_event_channel*) {}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_subscribe_devx_event(mlx5dv_devx_event_channel*,
                                                           mlx5dv_devx_obj*, uint16_t, uint16_t[],
                                                           uint64_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_subscribe_devx_event_fd(mlx5dv_devx_event_channel*, int,
                                                              mlx5dv_devx_obj*, uint16_t) {
  return ErrnoValueNotSupported();
}
// Returns -1 and sets errno (man page).
SOFTVERBS_WEAK_EXPORT ssize_t mlx5dv_devx_get_event(mlx5dv_devx_event_channel*,
                                                    mlx5dv_devx_async_event_hdr*, size_t) {
  return MinusOneNotSupported();
}

// ---------------------------------------------------------------------------
// DEVX: event queues and MSI-X vectors.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT mlx5dv_devx_msi_vector* mlx5dv_devx_alloc_msi_vector(ibv_context*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_free_msi_vector(mlx5dv_devx_msi_vector*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_devx_eq* mlx5dv_devx_create_eq(ibv_context*, const void*, size_t,
                                                            void*, size_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_devx_destroy_eq(mlx5dv_devx_eq*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// VAR doorbells, packet pacing and scheduling elements.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT mlx5dv_var* mlx5dv_alloc_var(ibv_context*, uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT void mlx5dv_free_var(mlx5dv_var*) {}
SOFTVERBS_WEAK_EXPORT mlx5dv_pp* mlx5dv_pp_alloc(ibv_context*, size_t, const void*, uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT void mlx5dv_pp_free(mlx5dv_pp*) {}
SOFTVERBS_WEAK_EXPORT mlx5dv_sched_node* mlx5dv_sched_node_create(ibv_context*,
                                                                  const mlx5dv_sched_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_sched_node_modify(mlx5dv_sched_node*, const mlx5dv_sched_attr*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_sched_node_destroy(mlx5dv_sched_node*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_sched_leaf* mlx5dv_sched_leaf_create(ibv_context*,
                                                                  const mlx5dv_sched_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_sched_leaf_modify(mlx5dv_sched_leaf*, const mlx5dv_sched_attr*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_sched_leaf_destroy(mlx5dv_sched_leaf*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// Flow steering through verbs flow objects.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT mlx5dv_flow_matcher* mlx5dv_create_flow_matcher(ibv_context*,
                                                                      mlx5dv_flow_matcher_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_destroy_flow_matcher(mlx5dv_flow_matcher*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_flow* mlx5dv_create_flow(mlx5dv_flow_matcher*,
                                                   mlx5dv_flow_match_parameters*, size_t,
                                                   mlx5dv_flow_action_attr[]) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_flow_action* mlx5dv_create_flow_action_esp(ibv_context*,
                                                                     ibv_flow_action_esp_attr*,
                                                                     mlx5dv_flow_action_esp*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_flow_action* mlx5dv_create_flow_action_modify_header(
    ibv_context*, size_t, uint64_t[], mlx5dv_flow_table_type) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_flow_action* mlx5dv_create_flow_action_packet_reformat(
    ibv_context*, size_t, void*, mlx5dv_flow_action_packet_reformat_type, mlx5dv_flow_table_type) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_steering_anchor* mlx5dv_create_steering_anchor(
    ibv_context*, mlx5dv_steering_anchor_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_destroy_steering_anchor(mlx5dv_steering_anchor*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// Direct Rules (software steering): domains, tables, matchers, rules.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_domain* mlx5dv_dr_domain_create(ibv_context*,
                                                                mlx5dv_dr_domain_type) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dr_domain_sync(mlx5dv_dr_domain*, uint32_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT void mlx5dv_dr_domain_set_reclaim_device_memory(mlx5dv_dr_domain*, bool) {}
SOFTVERBS_WEAK_EXPORT void mlx5dv_dr_domain_allow_duplicate_rules(mlx5dv_dr_domain*, bool) {}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dr_domain_destroy(mlx5dv_dr_domain*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_table* mlx5dv_dr_table_create(mlx5dv_dr_domain*, uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dr_table_destroy(mlx5dv_dr_table*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_matcher* mlx5dv_dr_matcher_create(mlx5dv_dr_table*, uint16_t,
                                                                  uint8_t,
                                                                  mlx5dv_flow_match_parameters*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dr_matcher_set_layout(mlx5dv_dr_matcher*,
                                                       mlx5dv_dr_matcher_layout*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dr_matcher_destroy(mlx5dv_dr_matcher*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_rule* mlx5dv_dr_rule_create(mlx5dv_dr_matcher*,
                                                            mlx5dv_flow_match_parameters*, size_t,
                                                            mlx5dv_dr_action*[]) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dr_rule_destroy(mlx5dv_dr_rule*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dr_aso_other_domain_link(mlx5dv_devx_obj*, mlx5dv_dr_domain*,
                                                          mlx5dv_dr_domain*, uint32_t, uint8_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dr_aso_other_domain_unlink(mlx5dv_devx_obj*, mlx5dv_dr_domain*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dump_dr_domain(FILE*, mlx5dv_dr_domain*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dump_dr_table(FILE*, mlx5dv_dr_table*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dump_dr_matcher(FILE*, mlx5dv_dr_matcher*) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dump_dr_rule(FILE*, mlx5dv_dr_rule*) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// Direct Rules: actions.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_ibv_qp(ibv_qp*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_table(mlx5dv_dr_table*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_root_table(mlx5dv_dr_table*,
                                                                                uint16_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_vport(mlx5dv_dr_domain*,
                                                                           uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_ib_port(mlx5dv_dr_domain*,
                                                                             uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_devx_tir(mlx5dv_devx_obj*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_array(
    mlx5dv_dr_domain*, size_t, mlx5dv_dr_action_dest_attr*[]) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_drop() {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_default_miss() {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_tag(uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_flow_counter(mlx5dv_devx_obj*,
                                                                             uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_modify_header(mlx5dv_dr_domain*,
                                                                              uint32_t, size_t,
                                                                              __be64[]) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_packet_reformat(
    mlx5dv_dr_domain*, uint32_t, mlx5dv_flow_action_packet_reformat_type, size_t, void*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_pop_vlan() {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_push_vlan(mlx5dv_dr_domain*,
                                                                          __be32) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_flow_meter(
    mlx5dv_dr_flow_meter_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dr_action_modify_flow_meter(mlx5dv_dr_action*,
                                                             mlx5dv_dr_flow_meter_attr*, __be64) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_flow_sampler(
    mlx5dv_dr_flow_sampler_attr*) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_aso(mlx5dv_dr_domain*,
                                                                    mlx5dv_devx_obj*, uint32_t,
                                                                    uint32_t, uint8_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dr_action_modify_aso(mlx5dv_dr_action*, uint32_t, uint32_t,
                                                      uint8_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int mlx5dv_dr_action_destroy(mlx5dv_dr_action*) {
  return ErrnoValueNotSupported();
}

}  // extern "C"
