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

/* Device-wide numbers of verbs objects (what mlx5dv_init_obj reports and
 * DEVX commands use to name them). */
uint32_t softverbs_pd_number(struct ibv_pd* pd);
uint32_t softverbs_cq_number(struct ibv_cq* cq);
uint32_t softverbs_srq_number(struct ibv_srq* srq);

#ifdef __cplusplus
}
#endif

#endif /* SOFTVERBS_ABI_IBVERBS_SOFTVERBS_PRIVATE_H_ */
