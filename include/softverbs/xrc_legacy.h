/*
 * softverbs: the legacy (OFED 1.3-1.5) XRC receive-QP API, on top of
 * rdma-core's <infiniband/verbs.h>.
 *
 * OFED 1.x let processes of one XRC domain share a receive-only QP that has no
 * struct ibv_qp in user space: it is addressed by (domain, QP number), each
 * process registers with it, and it lives until the last registered process
 * unregisters. rdma-core replaced the API with ibv_open_xrcd / XRC_RECV QPs /
 * ibv_open_qp; softverbs implements both, and these functions are exported from
 * softverbs' libibverbs.so.1 (version node IBVERBS_1.1).
 *
 * Semantics (see the man pages ibv_open_xrc_domain(3), ibv_create_xrc_rcv_qp(3),
 * ibv_modify_xrc_rcv_qp, ibv_reg_xrc_rcv_qp(3)):
 *  - a domain is keyed by the inode behind fd: oflag 0 attaches (EAGAIN if
 *    none), O_CREAT attaches or creates, O_CREAT|O_EXCL creates (EINVAL if one
 *    exists); fd == -1 with O_CREAT makes a private domain.
 *  - the creator of a receive QP is registered implicitly; every process
 *    registers and unregisters itself (registering twice is a no-op); the QP is
 *    destroyed when the last registration goes; a process that exits is
 *    unregistered and its domain references dropped.
 *  - reg/unreg/modify/query fail with EINVAL for an unknown QP number, a QP that
 *    is not an XRC receive QP, or a QP of another domain.
 *  - ibv_close_xrc_domain fails with EBUSY while this process is still
 *    registered with a receive QP of the domain.
 *  - async events of a receive QP reach every registered process with
 *    IBV_XRC_QP_EVENT_FLAG set in event_type and the QP number in
 *    element.xrc_qp_num; ibv_ack_async_event is a no-op for them.
 *  - all functions returning int return 0 or a positive errno.
 *
 * Source compatibility with OFED-era code. rdma-core's structs are ABI and
 * cannot grow the legacy members, so:
 *  - struct ibv_qp_init_attr had a trailing 'struct ibv_xrc_domain *xrc_domain'.
 *    Declare such attributes as 'struct ibv_xrc_qp_init_attr' (same members in
 *    the same places, xrc_domain last, as in OFED) and pass them to
 *    ibv_create_xrc_rcv_qp / ibv_query_xrc_rcv_qp, or to ibv_create_qp through
 *    IBV_XRC_QP_INIT_ATTR(&attr) for a legacy send QP (qp_type IBV_QPT_XRC).
 *    Binaries built against OFED keep working unchanged: the layouts agree.
 *  - struct ibv_send_wr's legacy 'xrc_remote_srq_num' sits where rdma-core put
 *    'qp_type.xrc.remote_srqn' (same offset). Define
 *    SOFTVERBS_LEGACY_XRC_WR_FIELD before including this header to get
 *    'wr.xrc_remote_srq_num' as a macro for it.
 *  - struct ibv_srq's legacy 'xrc_srq_num', 'xrc_domain' and 'xrc_cq' members do
 *    not exist: use ibv_get_srq_num(srq, &num) (rdma-core) for the number.
 *  - struct ibv_qp's legacy 'xrc_domain' member does not exist: keep the domain
 *    pointer you created the QP with.
 *  - struct ibv_async_event's 'element.xrc_qp_num': read it as
 *    IBV_XRC_EVENT_QP_NUM(&event) (the number is stored in element's storage).
 */
#ifndef SOFTVERBS_XRC_LEGACY_H_
#define SOFTVERBS_XRC_LEGACY_H_

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The legacy XRC send-side QP type (rdma-core: IBV_QPT_XRC_SEND = 9). */
#define IBV_QPT_XRC ((enum ibv_qp_type)5)

/* OR-ed into ibv_async_event.event_type for events of legacy receive QPs. */
enum ibv_xrc_event_flags {
  IBV_XRC_QP_EVENT_FLAG = 0x80000000,
};

/* The QP number of an event that carries IBV_XRC_QP_EVENT_FLAG. */
#define IBV_XRC_EVENT_QP_NUM(ev) (*(const uint32_t*)&(ev)->element)

struct ibv_xrc_domain {
  struct ibv_context* context;
  uint32_t handle;
};

/* struct ibv_qp_init_attr as OFED had it: identical leading members. */
struct ibv_xrc_qp_init_attr {
  void* qp_context;
  struct ibv_cq* send_cq;
  struct ibv_cq* recv_cq;
  struct ibv_srq* srq;
  struct ibv_qp_cap cap;
  enum ibv_qp_type qp_type;
  int sq_sig_all;
  struct ibv_xrc_domain* xrc_domain;
};

#define IBV_XRC_QP_INIT_ATTR(attr) ((struct ibv_qp_init_attr*)(attr))

#ifdef SOFTVERBS_LEGACY_XRC_WR_FIELD
#define xrc_remote_srq_num qp_type.xrc.remote_srqn
#endif

struct ibv_xrc_domain* ibv_open_xrc_domain(struct ibv_context* context, int fd, int oflag);
int ibv_close_xrc_domain(struct ibv_xrc_domain* d);

struct ibv_srq* ibv_create_xrc_srq(struct ibv_pd* pd, struct ibv_xrc_domain* xrc_domain,
                                   struct ibv_cq* xrc_cq, struct ibv_srq_init_attr* srq_init_attr);

int ibv_create_xrc_rcv_qp(struct ibv_xrc_qp_init_attr* init_attr, uint32_t* xrc_rcv_qpn);
int ibv_modify_xrc_rcv_qp(struct ibv_xrc_domain* xrc_domain, uint32_t xrc_qp_num,
                          struct ibv_qp_attr* attr, int attr_mask);
int ibv_query_xrc_rcv_qp(struct ibv_xrc_domain* xrc_domain, uint32_t xrc_qp_num,
                         struct ibv_qp_attr* attr, int attr_mask,
                         struct ibv_xrc_qp_init_attr* init_attr);
int ibv_reg_xrc_rcv_qp(struct ibv_xrc_domain* xrc_domain, uint32_t xrc_qp_num);
int ibv_unreg_xrc_rcv_qp(struct ibv_xrc_domain* xrc_domain, uint32_t xrc_qp_num);

#ifdef __cplusplus
}
#endif

#endif /* SOFTVERBS_XRC_LEGACY_H_ */
