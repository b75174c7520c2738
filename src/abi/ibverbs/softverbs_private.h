/*
 * softverbs' private entry points of libibverbs.so.1 (version node
 * SOFTVERBS_PRIVATE_1), for our other drop-in libraries: libmlx5.so.1 reaches
 * the daemon connection and the object numbers behind an ibv_context through
 * these. Not a public ABI (docs/abi.md): the libraries ship together.
 */
#ifndef SOFTVERBS_ABI_IBVERBS_SOFTVERBS_PRIVATE_H_
#define SOFTVERBS_ABI_IBVERBS_SOFTVERBS_PRIVATE_H_

#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* True when `device` is a softverbs device (softverbs0). */
bool softverbs_is_device(struct ibv_device* device);

/*
 * One request/reply on the context's daemon connection (protocol/messages.h:
 * `op` is a protocol::Op, req/rep the op's bodies). Returns 0 or the daemon's
 * positive errno; on success copies up to rep_len bytes of the reply body and
 * stores its full length in *rep_body_len (if not NULL). fds travel as
 * SCM_RIGHTS.
 */
int softverbs_call(struct ibv_context* context, uint16_t op, const void* req, size_t req_len,
                   void* rep, size_t rep_len, size_t* rep_body_len, const int* fds, size_t nfds);

/* The daemon-wide id of the context's connection; never reused while the
 * daemon runs, so it tells a reopened context from a closed one at the same
 * address. */
uint32_t softverbs_client_id(struct ibv_context* context);

/* One line on the log channel (common/log.h, SOFTVERBS_LOG) of libibverbs,
 * so that every library of the process writes to the same sink. A no-op when
 * the channel is off. */
void softverbs_vlog(const char* fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/*
 * What the kernel checks of a DEVX UMEM registration before CREATE_UMEM
 * (mlx5dv_devx_umem_reg): its size and access flags (EINVAL,
 * verbs/mr_rules.h), then that [addr, addr + size) is mapped memory the
 * access allows - readable, and writable for LOCAL_WRITE or REMOTE_WRITE -
 * which the kernel finds when it pins the pages (EFAULT). Returns 0 or that
 * errno, explained on the log channel.
 */
int softverbs_check_umem(const void* addr, size_t size, uint32_t access);

/*
 * A DEVX UMEM went live (+1, after its registration) or is gone (-1):
 * while any lives, registration holds other threads' and peers' writes
 * with its userfaultfd for every range (live_mr_ranges.h).
 */
void softverbs_note_umems(int delta);

/* Device-wide numbers of verbs objects (what mlx5dv_init_obj reports and
 * DEVX commands use to name them). */
uint32_t softverbs_pd_number(struct ibv_pd* pd);
uint32_t softverbs_cq_number(struct ibv_cq* cq);
uint32_t softverbs_srq_number(struct ibv_srq* srq);

/*
 * The DEVX data path (docs/devx.md, "Data path"): libmlx5 hands the
 * context's DEVX queue engine the buffers of each CQ and QP it created
 * through DEVX (addresses inside the caller's UMEMs); the engine watches
 * their doorbell records, executes send WQEs, fills the shadow receive queue
 * from receive WQEs and writes CQEs. Attach returns 0 or an errno.
 */
struct softverbs_devx_cq {
  void* buf;              /* the CQE array (cq_umem + cq_umem_offset) */
  uint32_t ncqe;          /* 1 << log_cq_size */
  uint32_t cqe_size;      /* 64 or 128 */
  volatile uint32_t* dbr; /* doorbell record: consumer index (be32, 24 bits) */
};
struct softverbs_devx_qp {
  void* rq_buf;          /* receive WQEs (wq_umem + wq_umem_offset) */
  uint32_t rq_wqe_cnt;   /* 1 << log_rq_size (0: no receive queue) */
  uint32_t rq_wqe_size;  /* 16 << log_rq_stride */
  void* sq_buf;          /* send WQEs, right after the receive queue */
  uint32_t sq_wqebb_cnt; /* 1 << log_sq_size basic blocks of 64 bytes (0: no SQ) */
  uint32_t reserved;
  volatile uint32_t* dbr; /* doorbell record: [0] receive counter, [1] send counter (be32) */
};
int softverbs_devx_attach_cq(struct ibv_context* context, uint32_t cqn,
                             const struct softverbs_devx_cq* cq);
int softverbs_devx_attach_qp(struct ibv_context* context, uint32_t qpn,
                             const struct softverbs_devx_qp* qp);
/* The requester's retry attributes of a DEVX QP (RTR2RTS: ack_timeout,
 * retry_count, rnr_retry). */
void softverbs_devx_set_qp_timers(struct ibv_context* context, uint32_t qpn, uint8_t timeout,
                                  uint8_t retry_cnt, uint8_t rnr_retry);
/* The object is destroyed: the engine stops touching its buffers. kind: 1 CQ, 2 QP. */
void softverbs_devx_detach(struct ibv_context* context, uint32_t kind, uint32_t number);

/*
 * mlx5dv_init_obj on verbs queues: mlx5 buffers for a verbs RC QP or a verbs
 * CQ, which the context's DEVX queue engine serves as it serves DEVX queues
 * (send WQEs executed on the QP, receive WQEs posted to its receive queue,
 * completions of the CQ written as CQEs). The buffers live until the object
 * is destroyed. Returns 0, EOPNOTSUPP (a QP type other than RC) or an errno.
 */
struct softverbs_dv_queue {
  void* sq_buf; /* QP: send basic blocks of 64 bytes */
  uint32_t sq_wqebb_cnt;
  void* rq_buf; /* QP: receive WQEs */
  uint32_t rq_wqe_cnt;
  uint32_t rq_stride;
  void* cq_buf; /* CQ: CQEs of cqe_size bytes */
  uint32_t cqe_cnt;
  uint32_t cqe_size;      /* CQ: 64 or 128 (the 64-byte CQE is the last half) */
  volatile uint32_t* dbr; /* QP: [0] receive, [1] send counters; CQ: [0] consumer index */
  void* uar;              /* a doorbell register page (writes are not needed) */
};
int softverbs_dv_init_qp(struct ibv_qp* qp, struct softverbs_dv_queue* out);
int softverbs_dv_init_cq(struct ibv_cq* cq, struct softverbs_dv_queue* out);
/* An AH's mlx5 address vector (mlx5dv_init_obj's view; NULL for NULL). */
struct mlx5_wqe_av;
struct mlx5_wqe_av* softverbs_dv_ah_av(struct ibv_ah* ah);
/* Device memory (ibv_alloc_dm): its bytes in this process and its length
 * (mlx5dv_init_obj's view; stores there are what ibv_memcpy_to_dm does). */
int softverbs_dm_view(struct ibv_dm* dm, void** buf, uint64_t* length);
/* A basic SRQ: rq_buf, rq_wqe_cnt and rq_stride are libmlx5's linked list of
 * receive WQEs (next_wqe_index linked in index order), dbr[0] its counter. */
int softverbs_dv_init_srq(struct ibv_srq* srq, struct softverbs_dv_queue* out);
/* mlx5dv_create_cq's CQE size (64 or 128) for the CQ's mlx5 view, set right
 * after the CQ is created, before anything can ask for the view. Returns 0
 * or EINVAL (another size). */
int softverbs_dv_set_cqe_size(struct ibv_cq* cq, uint32_t cqe_size);

/*
 * mlx5dv_create_qp's MLX5DV_QP_EX_WITH_* operations for the QP's mlx5dv_qp_ex,
 * set right after the QP is created (which marks it libmlx5's: its ibv_wr_*
 * builders then work whatever its send_ops_flags); and that mlx5dv_qp_ex
 * (mlx5dv_qp_ex_from_ibv_qp_ex; NULL for a QP that is not softverbs').
 */
struct mlx5dv_qp_ex;
void softverbs_dv_set_send_ops(struct ibv_qp* qp, uint64_t mlx5_send_ops);
/* mlx5dv_create_qp of a DC QP (attr->qp_type IBV_QPT_DRIVER): a DCI, or a
 * DCT (dct != 0) with its access key; ibv_create_qp_ex's checks and errno. */
struct ibv_qp* softverbs_create_dc_qp(struct ibv_context* context, struct ibv_qp_init_attr_ex* attr,
                                      int dct, uint64_t dc_access_key);
struct mlx5dv_qp_ex* softverbs_dv_qp_ex(struct ibv_qp_ex* qp);
/* A DCI created with streams (mlx5dv_create_qp, MLX5DV_QP_INIT_ATTR_MASK_
 * DCI_STREAMS): 2^log_num_errored streams in error move it to ERR; set right
 * after the DCI is created. */
void softverbs_dv_set_dci_streams(struct ibv_qp* qp, uint8_t log_num_errored);
/* MLX5DV_QP_CREATE_SIG_PIPELINING: a fenced WR after a bad signature stops
 * the send queue (the QP to SQD); set right after the QP is created. */
void softverbs_dv_enable_sig_pipelining(struct ibv_qp* qp);
/* mlx5dv_qp_cancel_posted_send_wrs: the count of the QP's WRs of wr_id not
 * yet started that now complete without running, or -EINVAL (the QP is not
 * in SQD). */
struct mlx5dv_qp_ex;
int softverbs_cancel_posted_send_wrs(struct mlx5dv_qp_ex* mqp, uint64_t wr_id);
/* mlx5dv_dci_stream_id_reset: 0, or EOPNOTSUPP (the DCI is not in RTS),
 * EINVAL (not a DCI with streams, or the stream is not in error). */
int softverbs_dci_stream_id_reset(struct ibv_qp* qp, uint16_t stream_id);

/* mlx5dv_create_mkey of an indirect key of pd whose layouts have at most
 * max_entries entries (libmlx5's rounded value); create_flags: the
 * MLX5DV_MKEY_INIT_ATTR_FLAGS_* libmlx5 took (REMOTE_INVALIDATE: a
 * SEND_WITH_INV may invalidate it; BLOCK_SIGNATURE: a UMR may give it a block
 * signature). NULL with errno set on failure.
 * mlx5dv_destroy_mkey: 0 or an errno. */
struct mlx5dv_mkey;
struct mlx5dv_mkey* softverbs_create_mkey(struct ibv_pd* pd, uint32_t max_entries,
                                          uint32_t create_flags);
int softverbs_destroy_mkey(struct mlx5dv_mkey* mkey);
/* What mlx5dv_mkey_check decodes: the bad signature the device kept for a
 * signature key since the last check (then forgotten). 0 with *has_error 0
 * or 1 (then *error filled: datapath/block_signature.h's SigError fields),
 * or an errno (EINVAL: the key was created without BLOCK_SIGNATURE). */
struct softverbs_sig_error {
  uint8_t domain;   /* 0: the wire's signature was bad, 1: the memory's */
  uint8_t syndrome; /* 1: guard (or CRC), 2: application tag, 4: reference tag */
  uint8_t kind;     /* the bad signature's kind: 1 CRC-32, 2 CRC-32C, 3/4 T10-DIF */
  uint64_t expected;
  uint64_t actual;
  uint64_t offset;
};
int softverbs_mkey_sig_error(struct mlx5dv_mkey* mkey, int* has_error,
                             struct softverbs_sig_error* error);

/* mlx5dv_create_flow's rules are ibv_create_flow's (the matcher's mask and
 * the flow's value turned into specs): the flow counts itself in *holder (the
 * matcher's count of its flows, read with __atomic builtins) until
 * ibv_destroy_flow destroys it, so that mlx5dv_destroy_flow_matcher can be
 * EBUSY while flows live. */
void softverbs_flow_hold(struct ibv_flow* flow, uint32_t* holder);

#ifdef __cplusplus
}
#endif

#endif /* SOFTVERBS_ABI_IBVERBS_SOFTVERBS_PRIVATE_H_ */
