// The SOFTVERBS_PRIVATE_1 entry points (softverbs_private.h): thin accessors
// over the provider's objects, for libmlx5.so.1.
#include "abi/ibverbs/softverbs_private.h"

#include <errno.h>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/live_mr_ranges.h"
#include "abi/ibverbs/mr_backing.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/self_maps.h"
#include "common/log.h"
#include "verbs/mr_rules.h"
#include "verbs/qp_names.h"

using namespace softverbs::provider;

SV_EXPORT bool softverbs_is_device(ibv_device* device) {
  return device != nullptr && device == SoftverbsDevice();
}

SV_EXPORT int softverbs_call(ibv_context* context, uint16_t op, const void* req, size_t req_len,
                             void* rep, size_t rep_len, size_t* rep_body_len, const int* fds,
                             size_t nfds) {
  if (context == nullptr) return EINVAL;
  if (op == 0 || op >= static_cast<uint16_t>(softverbs::protocol::Op::kCount)) return EINVAL;
  return Context::From(context)->channel.Call(static_cast<softverbs::protocol::Op>(op), req,
                                              req_len, rep, rep_len, fds, nfds, rep_body_len);
}

SV_EXPORT void softverbs_note_umems(int delta) {
  softverbs::provider::NoteUmems(delta);
}

SV_EXPORT int softverbs_check_umem(const void* addr, size_t size, uint32_t access) {
  const auto begin = reinterpret_cast<uint64_t>(addr);
  if (softverbs::verbs::MrRuleVerdict v =
          softverbs::verbs::CheckUmemRegistration(begin, size, access);
      !v.ok()) {
    softverbs::Log("mlx5dv_devx_umem_reg: %s", v.why.c_str());
    return v.err;
  }
  SelfMaps maps;
  const bool need_write = access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!addr || !MemoryIsAccessible(maps, begin, size, need_write)) {
    softverbs::Log("mlx5dv_devx_umem_reg: [%p, +%zu) is not mapped memory the access flags allow",
                   addr, size);
    return EFAULT;
  }
  return 0;
}

SV_EXPORT void softverbs_vlog(const char* fmt, va_list ap) {
  softverbs::VLog(fmt, ap);
}

SV_EXPORT uint32_t softverbs_client_id(ibv_context* context) {
  return context ? Context::From(context)->client_id : 0;
}

SV_EXPORT uint32_t softverbs_pd_number(ibv_pd* pd) {
  return pd ? FromPublic<Pd>(pd)->pdn : 0;
}

SV_EXPORT uint32_t softverbs_cq_number(ibv_cq* cq) {
  return cq ? FromPublic<Cq>(reinterpret_cast<ibv_cq_ex*>(cq))->cqn : 0;
}

SV_EXPORT int softverbs_dv_set_cqe_size(ibv_cq* cq, uint32_t cqe_size) {
  if (cq == nullptr || (cqe_size != 64 && cqe_size != 128)) return EINVAL;
  FromPublic<Cq>(reinterpret_cast<ibv_cq_ex*>(cq))->mlx5_cqe_size = cqe_size;
  return 0;
}

SV_EXPORT void softverbs_dv_set_send_ops(ibv_qp* qp, uint64_t mlx5_send_ops) {
  if (qp == nullptr) return;
  DvQpEx& dv = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(qp))->dv_ex;
  dv.send_ops = mlx5_send_ops;
  dv.made_by_mlx5dv = true;
}

SV_EXPORT ibv_qp* softverbs_create_dc_qp(ibv_context* context, ibv_qp_init_attr_ex* attr, int dct,
                                         uint64_t dc_access_key) {
  return CreateDcQp(context, attr, dct != 0, dc_access_key);
}

SV_EXPORT void softverbs_dv_set_dci_streams(ibv_qp* qp, uint8_t log_num_errored) {
  if (qp == nullptr) return;
  Qp* q = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(qp));
  std::lock_guard lock(q->sq_lock);
  q->sq.EnableStreams(1u << log_num_errored);
}

SV_EXPORT void softverbs_dv_enable_sig_pipelining(ibv_qp* qp) {
  if (qp == nullptr) return;
  Qp* q = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(qp));
  std::lock_guard lock(q->sq_lock);
  q->sq.EnableSigPipelining();
}

// libmlx5: the QP must be in SQD (its query of the QP, -EINVAL else); the
// WRs from the one the queue stopped at on whose wr_id matches become NOPs.
SV_EXPORT int softverbs_cancel_posted_send_wrs(mlx5dv_qp_ex* mqp, uint64_t wr_id) {
  if (mqp == nullptr) return -EINVAL;
  Qp* q = reinterpret_cast<DvQpEx*>(mqp)->qp;
  std::lock_guard lock(q->sq_lock);
  const uint32_t state = q->entry ? q->entry->state.load(std::memory_order_acquire)
                                  : static_cast<uint32_t>(q->ibv.qp_base.state);
  if (state != IBV_QPS_SQD) {
    Reject(EINVAL, "mlx5dv_qp_cancel_posted_send_wrs: QP 0x%x is not in SQD (state %u)",
           q->ibv.qp_base.qp_num, state);
    return -EINVAL;
  }
  int canceled = q->sq.Cancel(wr_id);
  // And those the network transport holds (a path that leaves the host).
  softverbs::protocol::CancelSendsRequest req{q->ibv.qp_base.qp_num, 0, wr_id};
  softverbs::protocol::CancelSendsReply rep{};
  Context* ctx = Context::From(q->ibv.qp_base.context);
  if (ctx->channel.Call(softverbs::protocol::Op::kCancelSends, &req, sizeof(req), &rep,
                        sizeof(rep)) == 0) {
    canceled += static_cast<int>(rep.canceled);
  }
  return canceled;
}

SV_EXPORT int softverbs_dci_stream_id_reset(ibv_qp* qp, uint16_t stream_id) {
  Qp* q = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(qp));
  const uint32_t qpn = qp->qp_num;
  const uint32_t state =
      q->entry ? q->entry->state.load(std::memory_order_acquire) : static_cast<uint32_t>(qp->state);
  // libmlx5's order: the state first (EOPNOTSUPP), then the QP's kind.
  if (state != IBV_QPS_RTS) {
    return Reject(EOPNOTSUPP, "mlx5dv_dci_stream_id_reset: QP 0x%x is not in RTS (state %u)", qpn,
                  state);
  }
  std::lock_guard lock(q->sq_lock);
  if (q->type != softverbs::verbs::kQptDcIni || !q->sq.HasStreams()) {
    return Reject(EINVAL, "mlx5dv_dci_stream_id_reset: QP 0x%x is not a DCI created with streams",
                  qpn);
  }
  if (!q->sq.ResetStream(stream_id)) {
    // The device's answer to resetting a stream that is not in error
    // (firmware BAD_PARAM, which libmlx5 reports as EINVAL).
    return Reject(EINVAL, "mlx5dv_dci_stream_id_reset: DCI 0x%x: stream %u is not in error", qpn,
                  stream_id);
  }
  return 0;
}

SV_EXPORT mlx5dv_qp_ex* softverbs_dv_qp_ex(ibv_qp_ex* qp) {
  if (qp == nullptr || !softverbs_is_device(qp->qp_base.context->device)) return nullptr;
  return &FromPublic<Qp>(qp)->dv_ex.ex;
}

SV_EXPORT uint32_t softverbs_srq_number(ibv_srq* srq) {
  return srq ? FromPublic<Srq>(srq)->srqn : 0;
}
