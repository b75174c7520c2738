// mlx5dv_create_qp: a verbs QP with libmlx5's vendor attributes, and
// mlx5dv_qp_ex_from_ibv_qp_ex, its mlx5 work request builders. The vendor
// attributes get libmlx5's checks, in its order, before ibv_create_qp_ex
// checks the verbs ones (libmlx5 checks a few of those first: a request
// wrong in both ways may get another errno). What softverbs does not have
// answers EOPNOTSUPP: the creation flags of Ethernet and
// signature offloads; raw WQEs run on RC and UC QPs, DMA memcpy on RC QPs
// and DCIs, memory-key (UMR) work requests on RC QPs (docs/devx.md,
// "mlx5dv_create_qp and raw WQEs", "DMA memcpy", "Indirect memory keys"). DC QPs
// (IBV_QPT_DRIVER: a DCI or a DCT) are made by softverbs_create_dc_qp and
// run on one host (docs/devx.md, "DC QPs").
#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"
#include "common/device_limits.h"

using softverbs::mlx5::RejectNull;

namespace {

constexpr uint64_t kKnownCompMask =
    MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS | MLX5DV_QP_INIT_ATTR_MASK_DC |
    MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS | MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS;
constexpr uint32_t kKnownCreateFlags =
    MLX5DV_QP_CREATE_TUNNEL_OFFLOADS | MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_UC |
    MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_MC | MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE |
    MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE | MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE |
    MLX5DV_QP_CREATE_SIG_PIPELINING;
// Scatter to CQE is an optimisation a device may take or leave: softverbs
// always places received bytes in the receive buffers, so both flags hold.
// Signature pipelining: the send queue stops at a fenced WR after a bad
// signature (docs/devx.md, "Signature keys").
constexpr uint32_t kSupportedCreateFlags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE |
                                           MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE |
                                           MLX5DV_QP_CREATE_SIG_PIPELINING;
constexpr uint64_t kMkeySendOps =
    MLX5DV_QP_EX_WITH_MR_INTERLEAVED | MLX5DV_QP_EX_WITH_MR_LIST | MLX5DV_QP_EX_WITH_MKEY_CONFIGURE;
constexpr uint64_t kKnownSendOps =
    kMkeySendOps | MLX5DV_QP_EX_WITH_RAW_WQE | MLX5DV_QP_EX_WITH_MEMCPY;

// libmlx5's create_dct: the verbs comp_mask PD alone (no send operations:
// a DCT does not send), the vendor comp_mask DC and creation flags, of
// which only the scatter-to-CQE switch.
int CheckDctAttributes(const ibv_qp_init_attr_ex& attr, const mlx5dv_qp_init_attr& dv) {
  if (attr.comp_mask & ~uint32_t{IBV_QP_INIT_ATTR_PD}) {
    return softverbs::mlx5::Reject(
        EINVAL, "mlx5dv_create_qp: a DCT takes comp_mask IBV_QP_INIT_ATTR_PD only (0x%x)",
        attr.comp_mask);
  }
  if (dv.comp_mask & ~(MLX5DV_QP_INIT_ATTR_MASK_DC | MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS)) {
    return softverbs::mlx5::Reject(
        EINVAL, "mlx5dv_create_qp: a DCT takes the DC and create-flags vendor masks only (0x%llx)",
        static_cast<unsigned long long>(dv.comp_mask));
  }
  if ((dv.comp_mask & MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS) &&
      (dv.create_flags & ~uint32_t{MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE})) {
    return softverbs::mlx5::Reject(
        EINVAL, "mlx5dv_create_qp: create_flags 0x%x on a DCT (only DISABLE_SCATTER_TO_CQE)",
        dv.create_flags);
  }
  return 0;
}

// What the vendor attributes ask that softverbs refuses, as an errno (0:
// nothing). Logged here.
int CheckVendorAttributes(const ibv_qp_init_attr_ex& attr, const mlx5dv_qp_init_attr& dv) {
  if (dv.comp_mask & ~kKnownCompMask) {
    return softverbs::mlx5::Reject(
        EINVAL, "mlx5dv_create_qp: comp_mask 0x%llx has bits libmlx5 does not know",
        static_cast<unsigned long long>(dv.comp_mask));
  }
  if ((dv.comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC) && attr.qp_type != IBV_QPT_DRIVER) {
    return softverbs::mlx5::Reject(EINVAL,
                                   "mlx5dv_create_qp: a DC QP must be of type IBV_QPT_DRIVER");
  }
  if (dv.comp_mask & MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS) {
    if (dv.create_flags & ~kKnownCreateFlags) {
      return softverbs::mlx5::Reject(
          EINVAL, "mlx5dv_create_qp: create_flags 0x%x have bits libmlx5 does not know",
          dv.create_flags);
    }
    if ((dv.create_flags & MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE) &&
        (dv.create_flags & MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE)) {
      return softverbs::mlx5::Reject(EINVAL,
                                     "mlx5dv_create_qp: scatter to CQE both disabled and allowed");
    }
    if (dv.create_flags & ~kSupportedCreateFlags) {
      return softverbs::mlx5::Reject(
          EOPNOTSUPP,
          "mlx5dv_create_qp: create_flags 0x%x: tunnel offloads, TIR self loopback and "
          "packet-based credits are not supported by softverbs",
          dv.create_flags & ~kSupportedCreateFlags);
    }
  }
  if (attr.qp_type == IBV_QPT_DRIVER) {
    if (!(dv.comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC)) {
      return softverbs::mlx5::Reject(
          EINVAL, "mlx5dv_create_qp: IBV_QPT_DRIVER without MLX5DV_QP_INIT_ATTR_MASK_DC");
    }
    if (dv.dc_init_attr.dc_type == MLX5DV_DCTYPE_DCT) return CheckDctAttributes(attr, dv);
    if (dv.dc_init_attr.dc_type != MLX5DV_DCTYPE_DCI) {
      return softverbs::mlx5::Reject(EINVAL, "mlx5dv_create_qp: dc_type %u is neither DCT nor DCI",
                                     dv.dc_init_attr.dc_type);
    }
    if (dv.comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS) {
      // libmlx5 refuses more than the device's dci_streams_caps.
      const auto& streams = dv.dc_init_attr.dci_streams;
      if (streams.log_num_concurent > softverbs::limits::kMaxLogDciStreams ||
          streams.log_num_errored > softverbs::limits::kMaxLogDciErroredStreams) {
        return softverbs::mlx5::Reject(
            EINVAL,
            "mlx5dv_create_qp: DCI streams (log %u concurrent, log %u errored) above the "
            "device's (log %u, log %u: dci_streams_caps)",
            streams.log_num_concurent, streams.log_num_errored,
            softverbs::limits::kMaxLogDciStreams, softverbs::limits::kMaxLogDciErroredStreams);
      }
    }
  }
  const uint64_t ops =
      (dv.comp_mask & MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS) ? dv.send_ops_flags : 0;
  if (ops & ~kKnownSendOps) {
    return softverbs::mlx5::Reject(
        EOPNOTSUPP, "mlx5dv_create_qp: send_ops_flags 0x%llx have bits libmlx5 does not know",
        static_cast<unsigned long long>(ops));
  }
  if ((ops & kMkeySendOps) && attr.qp_type != IBV_QPT_RC) {
    // libmlx5: memory-key work requests on RC QPs only.
    return softverbs::mlx5::Reject(
        EOPNOTSUPP, "mlx5dv_create_qp: memory-key (UMR) work requests are on RC QPs only (type %u)",
        attr.qp_type);
  }
  if ((ops & MLX5DV_QP_EX_WITH_MEMCPY) && attr.qp_type != IBV_QPT_RC &&
      attr.qp_type != IBV_QPT_DRIVER) {
    // libmlx5: DMA memcpy on RC QPs and DCIs (the DCT returned above).
    return softverbs::mlx5::Reject(
        EOPNOTSUPP, "mlx5dv_create_qp: DMA memcpy is on RC QPs and DCIs only (type %u)",
        attr.qp_type);
  }
  if ((ops & MLX5DV_QP_EX_WITH_RAW_WQE) && attr.qp_type != IBV_QPT_RC &&
      attr.qp_type != IBV_QPT_UC) {
    // libmlx5 builds raw WQEs on UD, XRC and DCI QPs too; their datagram and
    // XRC segments are not read here.
    return softverbs::mlx5::Reject(
        EOPNOTSUPP, "mlx5dv_create_qp: raw WQEs are supported on RC and UC QPs only (type %u)",
        attr.qp_type);
  }
  if ((ops & MLX5DV_QP_EX_WITH_MEMCPY) && !(attr.comp_mask & IBV_QP_INIT_ATTR_PD)) {
    // libmlx5's qp_init_wr_memcpy registers a buffer of the QP's PD.
    return softverbs::mlx5::Reject(
        EINVAL, "mlx5dv_create_qp: DMA memcpy needs the QP's PD (comp_mask IBV_QP_INIT_ATTR_PD)");
  }
  return 0;
}

}  // namespace

SV_MLX5_EXPORT ibv_qp* mlx5dv_create_qp(ibv_context* context, ibv_qp_init_attr_ex* qp_attr,
                                        mlx5dv_qp_init_attr* mlx5_qp_attr) {
  if (context == nullptr || !softverbs_is_device(context->device)) {
    // libmlx5: a context without mlx5 ops.
    return RejectNull(EOPNOTSUPP, "mlx5dv_create_qp: the context is not softverbs'");
  }
  if (qp_attr == nullptr) return RejectNull(EINVAL, "mlx5dv_create_qp: qp_attr is NULL");
  // libmlx5: send operations on a DCT are EINVAL before anything else.
  if (mlx5_qp_attr != nullptr && (qp_attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
      qp_attr->qp_type == IBV_QPT_DRIVER &&
      (mlx5_qp_attr->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC) &&
      mlx5_qp_attr->dc_init_attr.dc_type == MLX5DV_DCTYPE_DCT) {
    return RejectNull(EINVAL, "mlx5dv_create_qp: a DCT has no send operations (send_ops_flags)");
  }
  uint64_t send_ops = 0;
  if (mlx5_qp_attr != nullptr) {
    if (int err = CheckVendorAttributes(*qp_attr, *mlx5_qp_attr)) {
      errno = err;
      return nullptr;
    }
    if (mlx5_qp_attr->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS) {
      send_ops = mlx5_qp_attr->send_ops_flags;
    }
  } else if (qp_attr->qp_type == IBV_QPT_DRIVER) {
    return RejectNull(EINVAL, "mlx5dv_create_qp: IBV_QPT_DRIVER needs mlx5 attributes (DC)");
  }
  ibv_qp* qp = nullptr;
  if (qp_attr->qp_type == IBV_QPT_DRIVER) {
    const bool dct = mlx5_qp_attr->dc_init_attr.dc_type == MLX5DV_DCTYPE_DCT;
    qp = softverbs_create_dc_qp(context, qp_attr, dct ? 1 : 0,
                                dct ? mlx5_qp_attr->dc_init_attr.dct_access_key : 0);
  } else {
    qp = ibv_create_qp_ex(context, qp_attr);
  }
  if (qp == nullptr) return nullptr;  // the create explained it and set errno
  softverbs_dv_set_send_ops(qp, send_ops);
  if (mlx5_qp_attr != nullptr &&
      (mlx5_qp_attr->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS) &&
      (mlx5_qp_attr->create_flags & MLX5DV_QP_CREATE_SIG_PIPELINING)) {
    softverbs_dv_enable_sig_pipelining(qp);
  }
  if (qp_attr->qp_type == IBV_QPT_DRIVER &&
      (mlx5_qp_attr->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS)) {
    softverbs_dv_set_dci_streams(qp, mlx5_qp_attr->dc_init_attr.dci_streams.log_num_errored);
  }
  return qp;
}

// mlx5dv_qp_cancel_posted_send_wrs(3): a count, or -errno.
SV_MLX5_EXPORT int mlx5dv_qp_cancel_posted_send_wrs(mlx5dv_qp_ex* mqp, uint64_t wr_id) {
  return softverbs_cancel_posted_send_wrs(mqp, wr_id);
}

// mlx5dv_dci_stream_id_reset(3): the stream leaves the error state (the
// DCI's send queue keeps them: docs/devx.md, "DCI streams").
SV_MLX5_EXPORT int mlx5dv_dci_stream_id_reset(ibv_qp* qp, uint16_t stream_id) {
  if (qp == nullptr || !softverbs_is_device(qp->context->device)) {
    return softverbs::mlx5::Reject(EOPNOTSUPP,
                                   "mlx5dv_dci_stream_id_reset: the QP is not softverbs'");
  }
  return softverbs_dci_stream_id_reset(qp, stream_id);
}

SV_MLX5_EXPORT mlx5dv_qp_ex* mlx5dv_qp_ex_from_ibv_qp_ex(ibv_qp_ex* qp) {
  // libmlx5 hands out the QP's own structure, whatever the QP was created
  // with; its builders fail the batch when the QP does not allow them.
  mlx5dv_qp_ex* dv = softverbs_dv_qp_ex(qp);
  if (dv == nullptr) return RejectNull(EINVAL, "mlx5dv_qp_ex_from_ibv_qp_ex: not a softverbs QP");
  return dv;
}
