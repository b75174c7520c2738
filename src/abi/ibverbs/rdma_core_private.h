// The prototypes of libibverbs.so.1's exports that Debian's libibverbs-dev
// does not install: rdma-core 44's <infiniband/driver.h> (the provider
// interface, IBVERBS_PRIVATE_34), <infiniband/marshall.h> (ibv_copy_*) and
// the IBVERBS_1.1 compat symbol ibv_register_driver. Every public export is
// declared by <infiniband/verbs.h>; these are the rest.
//
// Why: every translation unit of libibverbs.so.1 sees these declarations
// (exports.h includes this file) and the library is compiled with
// -Werror=missing-declarations, so an exported function defined with any
// other prototype than rdma-core's is a compile error (issue 9: a wrong
// ibv_get_sysfs_path crashed Open MPI). Keep each prototype exactly as in
// rdma-core v44's headers; parameter names are left out.
#pragma once

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include <cstddef>
#include <cstdint>

// Provider-side types of driver.h / kern-abi.h / cmd_ioctl.h. Only pointers
// to them cross the ABI, so their names are all the prototypes need.
struct ibv_command_buffer;
struct verbs_context_ops;
struct verbs_counters;
struct verbs_cq;
struct verbs_device_ops;
struct verbs_dm;
struct verbs_flow_action;
struct verbs_mr;
struct verbs_qp;
struct verbs_srq;
struct verbs_sysfs_dev;
struct verbs_xrcd;
// kern-abi.h's command structs (generated there from the uverbs commands).
struct ibv_alloc_mw;
struct ibv_alloc_pd;
struct ibv_create_cq;
struct ibv_create_cq_ex;
struct ibv_create_qp;
struct ibv_create_qp_ex;
struct ibv_create_srq;
struct ibv_create_wq;
struct ibv_create_xsrq;
struct ibv_get_context;
struct ibv_modify_cq;
struct ibv_modify_qp;
struct ibv_modify_qp_ex;
struct ibv_modify_srq;
struct ibv_modify_wq;
struct ibv_open_qp;
struct ibv_open_xrcd;
struct ibv_query_port;
struct ibv_query_qp;
struct ibv_query_srq;
struct ibv_reg_mr;
struct ibv_rereg_mr;
struct ibv_resize_cq;

// driver.h: the GID types as sysfs names them (ibv_query_gid_type).
enum ibv_gid_type_sysfs {
  IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
  IBV_GID_TYPE_SYSFS_ROCE_V2,
};

extern "C" {

// IBVERBS_1.1 compat: the pre-rdma-core-13 driver registration.
typedef ibv_device* (*ibv_driver_init_func_1_1)(const char*, int);
void ibv_register_driver(const char*, ibv_driver_init_func_1_1);

// driver.h: logging, registration and context set-up of providers.
extern bool verbs_allow_disassociate_destroy;
void __verbs_log(verbs_context*, uint32_t, const char*, ...);
void verbs_register_driver_34(const verbs_device_ops*);
void* _verbs_init_and_alloc_context(ibv_device*, int, size_t, verbs_context*, uint32_t);
void verbs_uninit_context(verbs_context*);
void verbs_set_ops(verbs_context*, const verbs_context_ops*);
void verbs_init_cq(ibv_cq*, ibv_context*, ibv_comp_channel*, void*);
ibv_context* verbs_open_device(ibv_device*, void*);
// cmd_ioctl.h.
int execute_ioctl(ibv_context*, ibv_command_buffer*);
unsigned int __ioctl_final_num_attrs(unsigned int, ibv_command_buffer*);

// driver.h: the uverbs commands.
int ibv_cmd_get_context(verbs_context*, struct ibv_get_context*, size_t,
                        ib_uverbs_get_context_resp*, size_t);
int ibv_cmd_query_context(ibv_context*, ibv_command_buffer*);
int ibv_cmd_create_flow_action_esp(ibv_context*, ibv_flow_action_esp_attr*, verbs_flow_action*,
                                   ibv_command_buffer*);
int ibv_cmd_modify_flow_action_esp(verbs_flow_action*, ibv_flow_action_esp_attr*,
                                   ibv_command_buffer*);
int ibv_cmd_query_device_any(ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*,
                             size_t, ib_uverbs_ex_query_device_resp*, size_t*);
int ibv_cmd_query_port(ibv_context*, uint8_t, ibv_port_attr*, struct ibv_query_port*, size_t);
int ibv_cmd_alloc_pd(ibv_context*, ibv_pd*, struct ibv_alloc_pd*, size_t, ib_uverbs_alloc_pd_resp*,
                     size_t);
int ibv_cmd_dealloc_pd(ibv_pd*);
int ibv_cmd_open_xrcd(ibv_context*, verbs_xrcd*, int, ibv_xrcd_init_attr*, struct ibv_open_xrcd*,
                      size_t, ib_uverbs_open_xrcd_resp*, size_t);
int ibv_cmd_close_xrcd(verbs_xrcd*);
int ibv_cmd_reg_mr(ibv_pd*, void*, size_t, uint64_t, int, verbs_mr*, struct ibv_reg_mr*, size_t,
                   ib_uverbs_reg_mr_resp*, size_t);
int ibv_cmd_rereg_mr(verbs_mr*, uint32_t, void*, size_t, uint64_t, int, ibv_pd*,
                     struct ibv_rereg_mr*, size_t, ib_uverbs_rereg_mr_resp*, size_t);
int ibv_cmd_dereg_mr(verbs_mr*);
int ibv_cmd_query_mr(ibv_pd*, verbs_mr*, uint32_t);
int ibv_cmd_advise_mr(ibv_pd*, enum ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t);
int ibv_cmd_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int, verbs_mr*);
int ibv_cmd_alloc_mw(ibv_pd*, ibv_mw_type, ibv_mw*, struct ibv_alloc_mw*, size_t,
                     ib_uverbs_alloc_mw_resp*, size_t);
int ibv_cmd_dealloc_mw(ibv_mw*);
int ibv_cmd_create_cq(ibv_context*, int, ibv_comp_channel*, int, ibv_cq*, struct ibv_create_cq*,
                      size_t, ib_uverbs_create_cq_resp*, size_t);
int ibv_cmd_create_cq_ex(ibv_context*, const ibv_cq_init_attr_ex*, verbs_cq*,
                         struct ibv_create_cq_ex*, size_t, ib_uverbs_ex_create_cq_resp*, size_t,
                         uint32_t);
int ibv_cmd_poll_cq(ibv_cq*, int, ibv_wc*);
int ibv_cmd_req_notify_cq(ibv_cq*, int);
int ibv_cmd_resize_cq(ibv_cq*, int, struct ibv_resize_cq*, size_t, ib_uverbs_resize_cq_resp*,
                      size_t);
int ibv_cmd_destroy_cq(ibv_cq*);
int ibv_cmd_modify_cq(ibv_cq*, ibv_modify_cq_attr*, struct ibv_modify_cq*, size_t);
int ibv_cmd_create_srq(ibv_pd*, ibv_srq*, ibv_srq_init_attr*, struct ibv_create_srq*, size_t,
                       ib_uverbs_create_srq_resp*, size_t);
int ibv_cmd_create_srq_ex(ibv_context*, verbs_srq*, ibv_srq_init_attr_ex*, struct ibv_create_xsrq*,
                          size_t, ib_uverbs_create_srq_resp*, size_t);
int ibv_cmd_modify_srq(ibv_srq*, ibv_srq_attr*, int, struct ibv_modify_srq*, size_t);
int ibv_cmd_query_srq(ibv_srq*, ibv_srq_attr*, struct ibv_query_srq*, size_t);
int ibv_cmd_destroy_srq(ibv_srq*);
int ibv_cmd_create_qp(ibv_pd*, ibv_qp*, ibv_qp_init_attr*, struct ibv_create_qp*, size_t,
                      ib_uverbs_create_qp_resp*, size_t);
int ibv_cmd_create_qp_ex(ibv_context*, verbs_qp*, ibv_qp_init_attr_ex*, struct ibv_create_qp*,
                         size_t, ib_uverbs_create_qp_resp*, size_t);
int ibv_cmd_create_qp_ex2(ibv_context*, verbs_qp*, ibv_qp_init_attr_ex*, struct ibv_create_qp_ex*,
                          size_t, ib_uverbs_ex_create_qp_resp*, size_t);
int ibv_cmd_open_qp(ibv_context*, verbs_qp*, int, ibv_qp_open_attr*, struct ibv_open_qp*, size_t,
                    ib_uverbs_create_qp_resp*, size_t);
int ibv_cmd_query_qp(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*, struct ibv_query_qp*, size_t);
int ibv_cmd_modify_qp(ibv_qp*, ibv_qp_attr*, int, struct ibv_modify_qp*, size_t);
int ibv_cmd_modify_qp_ex(ibv_qp*, ibv_qp_attr*, int, struct ibv_modify_qp_ex*, size_t,
                         ib_uverbs_ex_modify_qp_resp*, size_t);
int ibv_cmd_destroy_qp(ibv_qp*);
int ibv_cmd_post_send(ibv_qp*, ibv_send_wr*, ibv_send_wr**);
int ibv_cmd_post_recv(ibv_qp*, ibv_recv_wr*, ibv_recv_wr**);
int ibv_cmd_post_srq_recv(ibv_srq*, ibv_recv_wr*, ibv_recv_wr**);
int ibv_cmd_create_ah(ibv_pd*, ibv_ah*, ibv_ah_attr*, ib_uverbs_create_ah_resp*, size_t);
int ibv_cmd_destroy_ah(ibv_ah*);
int ibv_cmd_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t);
int ibv_cmd_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t);
int ibv_cmd_create_flow(ibv_qp*, ibv_flow*, ibv_flow_attr*, void*, size_t);
int ibv_cmd_destroy_flow(ibv_flow*);
int ibv_cmd_create_wq(ibv_context*, ibv_wq_init_attr*, ibv_wq*, struct ibv_create_wq*, size_t,
                      ib_uverbs_ex_create_wq_resp*, size_t);
int ibv_cmd_destroy_flow_action(verbs_flow_action*);
int ibv_cmd_modify_wq(ibv_wq*, ibv_wq_attr*, struct ibv_modify_wq*, size_t);
int ibv_cmd_destroy_wq(ibv_wq*);
int ibv_cmd_create_rwq_ind_table(ibv_context*, ibv_rwq_ind_table_init_attr*, ibv_rwq_ind_table*,
                                 ib_uverbs_ex_create_rwq_ind_table_resp*, size_t);
int ibv_cmd_destroy_rwq_ind_table(ibv_rwq_ind_table*);
int ibv_cmd_create_counters(ibv_context*, ibv_counters_init_attr*, verbs_counters*,
                            ibv_command_buffer*);
int ibv_cmd_destroy_counters(verbs_counters*);
int ibv_cmd_read_counters(verbs_counters*, uint64_t*, uint32_t, uint32_t, ibv_command_buffer*);
int ibv_cmd_alloc_dm(ibv_context*, const ibv_alloc_dm_attr*, verbs_dm*, ibv_command_buffer*);
int ibv_cmd_free_dm(verbs_dm*);
int ibv_cmd_reg_dm_mr(ibv_pd*, verbs_dm*, uint64_t, size_t, unsigned int, verbs_mr*,
                      ibv_command_buffer*);

// driver.h: fork helpers, sysfs and GID types.
int ibv_dontfork_range(void*, size_t);
int ibv_dofork_range(void*, size_t);
const char* ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char*, const char*, char*, size_t);
int ibv_read_ibdev_sysfs_file(char*, size_t, verbs_sysfs_dev*, const char*, ...)
    __attribute__((format(printf, 4, 5)));
int ibv_query_gid_type(ibv_context*, uint8_t, unsigned int, enum ibv_gid_type_sysfs*);

// marshall.h: kernel-layout <-> libibverbs-layout copies.
void ibv_copy_qp_attr_from_kern(ibv_qp_attr*, ib_uverbs_qp_attr*);
void ibv_copy_ah_attr_from_kern(ibv_ah_attr*, ib_uverbs_ah_attr*);
void ibv_copy_path_rec_from_kern(ibv_sa_path_rec*, ib_user_path_rec*);
void ibv_copy_path_rec_to_kern(ib_user_path_rec*, ibv_sa_path_rec*);

}  // extern "C"
