#include "abi/ibverbs/dv_qp_ex.h"

#include <errno.h>
#include <string.h>

#include "abi/ibverbs/mkey.h"
#include "abi/ibverbs/post_checks.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/sig_block_attr.h"
#include "common/device_limits.h"
#include "datapath/mkey_layout.h"
#include "datapath/mlx5_wqe.h"
#include "verbs/qp_names.h"

namespace softverbs::provider {
namespace {

namespace dp = softverbs::datapath;
namespace mlx5 = softverbs::datapath::mlx5;

// A raw WQE is read as a ring of its own: at most kMaxWqeDs segments, and
// the parser reads no more than the WQE's ds says.
constexpr uint32_t kRawWqeRingBlocks = 16;
static_assert(kRawWqeRingBlocks * mlx5::kSendWqeBb >= mlx5::kMaxWqeDs * mlx5::kSegBytes);

Qp* QpOf(mlx5dv_qp_ex* mq) {
  return reinterpret_cast<DvQpEx*>(mq)->qp;
}

// The first error of a batch is the one wr_complete reports (qp_ex_ops.cc).
void FailBatch(Qp* qp, int err) {
  if (!qp->batch_error) qp->batch_error = err;
}

void NotSupported(mlx5dv_qp_ex* mq, const char* builder) {
  Qp* qp = QpOf(mq);
  FailBatch(qp, Reject(EOPNOTSUPP, "mlx5dv_wr_%s: QP 0x%x: not supported by softverbs", builder,
                       qp->ibv.qp_base.qp_num));
}

void RawWqe(mlx5dv_qp_ex* mq, const void* wqe) {
  Qp* qp = QpOf(mq);
  const uint32_t qpn = qp->ibv.qp_base.qp_num;
  if (!(qp->dv_ex.send_ops & MLX5DV_QP_EX_WITH_RAW_WQE)) {
    FailBatch(qp, Reject(EINVAL,
                         "mlx5dv_wr_raw_wqe: QP 0x%x was not created with "
                         "MLX5DV_QP_EX_WITH_RAW_WQE (mlx5dv_create_qp)",
                         qpn));
    return;
  }
  if (wqe == nullptr) {
    FailBatch(qp, Reject(EINVAL, "mlx5dv_wr_raw_wqe: QP 0x%x: the WQE is NULL", qpn));
    return;
  }
  mlx5::ParsedSendWqe parsed;
  const mlx5::WqeError error =
      mlx5::ParseSendWqe(static_cast<const uint8_t*>(wqe), kRawWqeRingBlocks, 0, qpn, &parsed);
  if (error != mlx5::WqeError::kNone) {
    FailBatch(qp, Reject(EINVAL, "mlx5dv_wr_raw_wqe: QP 0x%x: opcode 0x%x: %s", qpn, parsed.opcode,
                         mlx5::WqeErrorName(error)));
    return;
  }
  if (parsed.info->nop) {
    FailBatch(qp,
              Reject(EOPNOTSUPP, "mlx5dv_wr_raw_wqe: QP 0x%x: a NOP WQE is not supported", qpn));
    return;
  }
  dp::SendWr& wr = qp->batch.emplace_back(parsed.wr);
  wr.wr_id = qp->ibv.wr_id;
  wr.raw_wqe = 1;
}

// The DCT the last WR goes to: its number and access key, and the path
// of the AH as a UD WR takes it; and its DCI stream (0 unless named by
// mlx5dv_wr_set_dc_addr_stream; a DCI created without streams has one). Only
// a DCI has these builders in libmlx5.
void SetDcAddrOfStream(mlx5dv_qp_ex* mq, ibv_ah* ah, uint32_t remote_dctn, uint64_t remote_dc_key,
                       uint16_t stream) {
  Qp* qp = QpOf(mq);
  if (qp->type != verbs::kQptDcIni) {
    NotSupported(mq, "set_dc_addr (on a QP that is not a DCI)");
    return;
  }
  if (ah == nullptr) {
    FailBatch(
        qp, Reject(EINVAL, "mlx5dv_wr_set_dc_addr: DCI 0x%x: ah is NULL", qp->ibv.qp_base.qp_num));
    return;
  }
  if (qp->batch.empty()) {
    FailBatch(qp, Reject(EINVAL, "mlx5dv_wr_set_dc_addr: DCI 0x%x: no WR is open",
                         qp->ibv.qp_base.qp_num));
    return;
  }
  dp::SendWr& wr = qp->batch.back();
  SetUdAddress(Context::From(qp->ibv.qp_base.context), ah, remote_dctn, 0, &wr);
  wr.dc_key = remote_dc_key;
  wr.dc_addr_set = true;
  wr.dci_stream = stream;
}
void SetDcAddr(mlx5dv_qp_ex* mq, ibv_ah* ah, uint32_t remote_dctn, uint64_t remote_dc_key) {
  SetDcAddrOfStream(mq, ah, remote_dctn, remote_dc_key, 0);
}
// Memory-key work requests (UMR), as libmlx5 builds them: on an RC QP
// created with any of the memory-key send_ops flags, inline
// (IBV_SEND_INLINE), mlx5dv_wr_mkey_configure opening the WR and its
// setters - each at most once - closing it when the last comes;
// mlx5dv_wr_mr_list and mlx5dv_wr_mr_interleaved are the three in one. An
// error fails the batch (wr_complete reports the first) and the setters
// after it do nothing. The WR is a local operation of the send queue
// (datapath/local_ops.h): the device gives the key its layout there.
constexpr uint64_t kMkeySendOps =
    MLX5DV_QP_EX_WITH_MR_INTERLEAVED | MLX5DV_QP_EX_WITH_MR_LIST | MLX5DV_QP_EX_WITH_MKEY_CONFIGURE;
constexpr uint32_t kMkeyAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

void MkeyConfigure(mlx5dv_qp_ex* mq, mlx5dv_mkey* dv_mkey, uint8_t num_setters,
                   mlx5dv_mkey_conf_attr* attr) {
  Qp* qp = QpOf(mq);
  const uint32_t qpn = qp->ibv.qp_base.qp_num;
  qp->dv_ex.umr_mkey = nullptr;
  if (!(qp->dv_ex.send_ops & kMkeySendOps)) {
    FailBatch(qp, Reject(EINVAL,
                         "mlx5dv_wr_mkey_configure: QP 0x%x was not created with a memory-key "
                         "send_ops flag (MLX5DV_QP_EX_WITH_MR_LIST, _MR_INTERLEAVED, "
                         "_MKEY_CONFIGURE)",
                         qpn));
    return;
  }
  if (!(qp->ibv.wr_flags & IBV_SEND_INLINE)) {
    FailBatch(qp, Reject(EOPNOTSUPP,
                         "mlx5dv_wr_mkey_configure: QP 0x%x: a UMR carries its layout inline "
                         "(wr_flags needs IBV_SEND_INLINE)",
                         qpn));
    return;
  }
  if (attr == nullptr || attr->comp_mask != 0 ||
      (attr->conf_flags & ~uint64_t{MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR})) {
    FailBatch(qp,
              Reject(EOPNOTSUPP,
                     "mlx5dv_wr_mkey_configure: QP 0x%x: attr is NULL or has unknown bits", qpn));
    return;
  }
  if (dv_mkey == nullptr) {
    FailBatch(qp, Reject(EINVAL, "mlx5dv_wr_mkey_configure: QP 0x%x: mkey is NULL", qpn));
    return;
  }
  dp::SendWr& wr = qp->batch.emplace_back();
  wr.wr_id = qp->ibv.wr_id;
  // The layout is the WR's inline bytes, not a payload.
  wr.send_flags = qp->ibv.wr_flags & ~uint32_t{IBV_SEND_INLINE};
  wr.opcode = dp::kWrMlx5Umr;
  wr.imm_data = dv_mkey->lkey;
  wr.compare_add = 1;
  // libmlx5: the flag takes a signature key's block signature away (on
  // another key it does nothing); without it the key keeps the one it has.
  if ((attr->conf_flags & MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR) && MkeyOf(dv_mkey)->signature) {
    wr.swap |= dp::kUmrResetsSig;
  }
  if (num_setters == 0) return;
  qp->dv_ex.umr_mkey = MkeyOf(dv_mkey);
  qp->dv_ex.umr_setters_left = num_setters;
}

// The open UMR's WR for a setter, or nullptr (the batch failed already, or
// no mlx5dv_wr_mkey_configure opened one: EINVAL).
dp::SendWr* OpenUmr(Qp* qp, const char* setter) {
  if (qp->batch_error) return nullptr;
  if (qp->dv_ex.umr_mkey == nullptr || qp->batch.empty() ||
      qp->batch.back().opcode != dp::kWrMlx5Umr) {
    FailBatch(qp, Reject(EINVAL, "mlx5dv_wr_%s: QP 0x%x: no mlx5dv_wr_mkey_configure is open",
                         setter, qp->ibv.qp_base.qp_num));
    return nullptr;
  }
  return &qp->batch.back();
}

void SetterDone(Qp* qp) {
  if (--qp->dv_ex.umr_setters_left == 0) qp->dv_ex.umr_mkey = nullptr;
}

void SetMkeyAccessFlags(mlx5dv_qp_ex* mq, uint32_t access_flags) {
  Qp* qp = QpOf(mq);
  dp::SendWr* wr = OpenUmr(qp, "set_mkey_access_flags");
  if (!wr) return;
  if (access_flags & ~kMkeyAccess) {
    FailBatch(qp, Reject(EINVAL,
                         "mlx5dv_wr_set_mkey_access_flags: QP 0x%x: access 0x%x has bits other "
                         "than LOCAL_WRITE and REMOTE_*",
                         qp->ibv.qp_base.qp_num, access_flags));
    return;
  }
  if (wr->swap & dp::kUmrSetsAccess) {
    FailBatch(qp, Reject(EINVAL, "mlx5dv_wr_set_mkey_access_flags: QP 0x%x: called twice",
                         qp->ibv.qp_base.qp_num));
    return;
  }
  wr->bind_access = access_flags;
  wr->swap |= dp::kUmrSetsAccess;
  SetterDone(qp);
}

// A layout: repeat_count blocks of the interleaved entries (is_interleaved),
// or one block of the SGEs.
void SetMkeyLayout(Qp* qp, const char* setter, bool is_interleaved, uint32_t repeat_count,
                   uint16_t num_entries, const mlx5dv_mr_interleaved* interleaved,
                   const ibv_sge* sge) {
  dp::SendWr* wr = OpenUmr(qp, setter);
  if (!wr) return;
  const uint32_t qpn = qp->ibv.qp_base.qp_num;
  if (num_entries > qp->dv_ex.umr_mkey->max_entries) {
    FailBatch(qp, Reject(ENOMEM, "mlx5dv_wr_%s: QP 0x%x: %u entries, the key takes %u", setter, qpn,
                         num_entries, qp->dv_ex.umr_mkey->max_entries));
    return;
  }
  if (num_entries > 0 && (is_interleaved ? interleaved == nullptr : sge == nullptr)) {
    FailBatch(qp, Reject(EINVAL, "mlx5dv_wr_%s: QP 0x%x: the entries are NULL", setter, qpn));
    return;
  }
  if (wr->swap & dp::kUmrSetsLayout) {
    FailBatch(qp, Reject(EINVAL, "mlx5dv_wr_%s: QP 0x%x: the layout is set already", setter, qpn));
    return;
  }
  dp::UmrEntry entries[limits::kMaxMkeyEntries] = {};
  // A block signature set before the layout follows the entries (UmrLayoutOf).
  dp::SigAttr sig{};
  if (wr->swap & dp::kUmrSetsSig)
    memcpy(&sig, wr->inline_data + wr->inline_len - sizeof(sig), sizeof(sig));
  for (uint16_t i = 0; i < num_entries; ++i) {
    if (is_interleaved) {
      entries[i] = {interleaved[i].addr, interleaved[i].lkey, interleaved[i].bytes_count,
                    interleaved[i].bytes_count + interleaved[i].bytes_skip, 0};
    } else {
      entries[i] = {sge[i].addr, sge[i].lkey, sge[i].length, sge[i].length, 0};
    }
  }
  memcpy(wr->inline_data, entries, num_entries * sizeof(dp::UmrEntry));
  wr->inline_len = num_entries * sizeof(dp::UmrEntry);
  if (wr->swap & dp::kUmrSetsSig) {
    memcpy(wr->inline_data + wr->inline_len, &sig, sizeof(sig));
    wr->inline_len += sizeof(sig);
  }
  wr->compare_add = is_interleaved ? repeat_count : 1;
  wr->swap |= dp::kUmrSetsLayout;
  SetterDone(qp);
}

void SetMkeyLayoutList(mlx5dv_qp_ex* mq, uint16_t num_sges, const ibv_sge* sge) {
  SetMkeyLayout(QpOf(mq), "set_mkey_layout_list", false, 1, num_sges, nullptr, sge);
}
void SetMkeyLayoutInterleaved(mlx5dv_qp_ex* mq, uint32_t repeat_count, uint16_t num_interleaved,
                              const mlx5dv_mr_interleaved* data) {
  SetMkeyLayout(QpOf(mq), "set_mkey_layout_interleaved", true, repeat_count, num_interleaved, data,
                nullptr);
}
void MrInterleaved(mlx5dv_qp_ex* mq, mlx5dv_mkey* mkey, uint32_t access_flags,
                   uint32_t repeat_count, uint16_t num_interleaved, mlx5dv_mr_interleaved* data) {
  mlx5dv_mkey_conf_attr attr{};
  MkeyConfigure(mq, mkey, 2, &attr);
  SetMkeyAccessFlags(mq, access_flags);
  SetMkeyLayoutInterleaved(mq, repeat_count, num_interleaved, data);
}
void MrList(mlx5dv_qp_ex* mq, mlx5dv_mkey* mkey, uint32_t access_flags, uint16_t num_sges,
            ibv_sge* sge) {
  mlx5dv_mkey_conf_attr attr{};
  MkeyConfigure(mq, mkey, 2, &attr);
  SetMkeyAccessFlags(mq, access_flags);
  SetMkeyLayoutList(mq, num_sges, sge);
}
// A block signature (docs/devx.md, "Signature keys"), with libmlx5's
// checks: a key created with BLOCK_SIGNATURE, the setter once, the
// attributes valid (sig_block_attr.h). It rides after the layout's entries.
void SetMkeySigBlock(mlx5dv_qp_ex* mq, const mlx5dv_sig_block_attr* attr) {
  Qp* qp = QpOf(mq);
  const Mkey* mkey = qp->dv_ex.umr_mkey;
  dp::SendWr* wr = OpenUmr(qp, "set_mkey_sig_block");
  if (!wr) return;
  const uint32_t qpn = qp->ibv.qp_base.qp_num;
  if (!mkey->signature) {
    FailBatch(qp, Reject(EINVAL,
                         "mlx5dv_wr_set_mkey_sig_block: QP 0x%x: memory key 0x%x was created "
                         "without MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE",
                         qpn, mkey->dv.lkey));
    return;
  }
  if (wr->swap & dp::kUmrSetsSig) {
    FailBatch(qp, Reject(EINVAL, "mlx5dv_wr_set_mkey_sig_block: QP 0x%x: called twice", qpn));
    return;
  }
  if (attr == nullptr) {
    FailBatch(qp, Reject(EINVAL, "mlx5dv_wr_set_mkey_sig_block: QP 0x%x: attr is NULL", qpn));
    return;
  }
  dp::SigAttr sig{};
  const char* why = "";
  if (int err = SigAttrFrom(*attr, &sig, &why)) {
    FailBatch(qp, Reject(err, "mlx5dv_wr_set_mkey_sig_block: QP 0x%x: %s", qpn, why));
    return;
  }
  memcpy(wr->inline_data + wr->inline_len, &sig, sizeof(sig));
  wr->inline_len += sizeof(sig);
  wr->swap |= dp::kUmrSetsSig;
  SetterDone(qp);
}
void SetMkeyCrypto(mlx5dv_qp_ex* mq, const mlx5dv_crypto_attr*) {
  NotSupported(mq, "set_mkey_crypto");
}
// DMA memcpy (an RC QP or a DCI created with MLX5DV_QP_EX_WITH_MEMCPY): a
// local operation of the send queue (datapath/local_ops.h) that completes
// with MLX5DV_WC_MEMCPY. libmlx5 fails the batch with EINVAL for a length
// of 0 or above the device's max_wr_memcpy_length.
void Memcpy(mlx5dv_qp_ex* mq, uint32_t dest_lkey, uint64_t dest_addr, uint32_t src_lkey,
            uint64_t src_addr, size_t length) {
  Qp* qp = QpOf(mq);
  const uint32_t qpn = qp->ibv.qp_base.qp_num;
  if (!(qp->dv_ex.send_ops & MLX5DV_QP_EX_WITH_MEMCPY)) {
    FailBatch(qp, Reject(EINVAL,
                         "mlx5dv_wr_memcpy: QP 0x%x was not created with "
                         "MLX5DV_QP_EX_WITH_MEMCPY (mlx5dv_create_qp)",
                         qpn));
    return;
  }
  if (length == 0 || length > limits::kMaxWrMemcpyLength) {
    FailBatch(qp, Reject(EINVAL,
                         "mlx5dv_wr_memcpy: QP 0x%x: length %zu is outside 1..%llu "
                         "(max_wr_memcpy_length)",
                         qpn, length, static_cast<unsigned long long>(limits::kMaxWrMemcpyLength)));
    return;
  }
  dp::SendWr& wr = qp->batch.emplace_back();
  wr.wr_id = qp->ibv.wr_id;
  wr.send_flags = qp->ibv.wr_flags;
  wr.opcode = dp::kWrMlx5Memcpy;
  wr.num_sge = 1;
  wr.sge[0] = {src_addr, static_cast<uint32_t>(length), src_lkey};
  wr.memcpy_dest_addr = dest_addr;
  wr.memcpy_dest_lkey = dest_lkey;
}
static_assert(static_cast<int>(MLX5DV_WC_MEMCPY) == static_cast<int>(IBV_WC_DRIVER3),
              "the opcode table's MLX5_MEMCPY completion");
static_assert(limits::kMaxWrMemcpyLength <= UINT32_MAX, "a memcpy's length fits an SGE's");

}  // namespace

void InstallDvQpExOps(Qp* qp) {
  DvQpEx& dv = qp->dv_ex;
  dv.qp = qp;
  mlx5dv_qp_ex& ex = dv.ex;
  ex.comp_mask = 0;
  ex.wr_set_dc_addr = SetDcAddr;
  ex.wr_mr_interleaved = MrInterleaved;
  ex.wr_mr_list = MrList;
  ex.wr_mkey_configure = MkeyConfigure;
  ex.wr_set_mkey_access_flags = SetMkeyAccessFlags;
  ex.wr_set_mkey_layout_list = SetMkeyLayoutList;
  ex.wr_set_mkey_layout_interleaved = SetMkeyLayoutInterleaved;
  ex.wr_set_mkey_sig_block = SetMkeySigBlock;
  ex.wr_raw_wqe = RawWqe;
  ex.wr_set_dc_addr_stream = SetDcAddrOfStream;
  ex.wr_memcpy = Memcpy;
  ex.wr_set_mkey_crypto = SetMkeyCrypto;
}

}  // namespace softverbs::provider
