// The DEVX data path's side in libmlx5 (docs/devx.md, "Data path"): after
// the firmware created a CQ or QP, the addresses of its buffers and doorbell
// record are worked out from the create box (UMEM ids and offsets, queue
// sizes) and handed to the context's DEVX queue engine in libibverbs; the
// retry attributes of RTR2RTS/RTS2RTS follow, and a destroy detaches.
#include <algorithm>
#include <map>
#include <mutex>
#include <span>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"
#include "common/no_destructor.h"
#include "devx/object_handle.h"
#include "devx/prm_command_layouts.h"
#include "devx/prm_context_layouts.h"
#include "devx/prm_opcodes.h"

namespace softverbs::mlx5 {
namespace {

using devx::GetField;
namespace layout = devx::layout;
namespace opcode = devx::opcode;

constexpr uint32_t kCqKind = 1;  // softverbs_devx_detach kinds
constexpr uint32_t kQpKind = 2;
constexpr uint32_t kSendWqeBb = 64;
constexpr uint32_t kRqTypeRegular = 0;

struct UmemRange {
  ibv_context* context;
  uint8_t* addr;
  uint64_t size;
};
std::mutex umems_mutex;
NoDestructor<std::map<uint32_t, UmemRange>> umems;  // by UMEM id (device-wide ids)

// The address `len` bytes at `offset` of UMEM `id` of `context`, or
// nullptr when that range is not inside it.
uint8_t* UmemAddress(ibv_context* context, uint32_t id, uint64_t offset, uint64_t len) {
  std::lock_guard lock(umems_mutex);
  auto it = umems->find(id);
  if (it == umems->end() || it->second.context != context) return nullptr;
  if (offset > it->second.size || len > it->second.size - offset) return nullptr;
  return it->second.addr + offset;
}

uint16_t OpcodeOf(std::span<const uint8_t> in) {
  return static_cast<uint16_t>(GetField(in, layout::in_hdr::kOpcode));
}

void AttachCq(ibv_context* context, std::span<const uint8_t> in, uint32_t cqn) {
  if (in.size() < layout::create_cq::kMinInBytes) return;
  const auto cqc = in.subspan(layout::create_cq::kCqcByte);
  softverbs_devx_cq desc{};
  desc.ncqe = 1u << GetField(cqc, layout::cqc::kLogCqSize);
  desc.cqe_size = GetField(cqc, layout::cqc::kCqeSz) == 0 ? 64 : 128;
  desc.buf = UmemAddress(context, GetField(in, layout::create_cq::kCqUmemId),
                         devx::GetField64(in, layout::create_cq::kCqUmemOffset),
                         uint64_t{desc.ncqe} * desc.cqe_size);
  desc.dbr = reinterpret_cast<volatile uint32_t*>(
      UmemAddress(context, GetField(cqc, layout::cqc::kDbrUmemId),
                  devx::GetField64(cqc, layout::cqc::kDbrAddr), 8));
  if (desc.buf == nullptr || desc.dbr == nullptr) {
    Reject(0, "devx: CQ 0x%x: its buffer or doorbell record is not inside its UMEMs: no data path",
           cqn);
    return;
  }
  if (int err = softverbs_devx_attach_cq(context, cqn, &desc)) {
    Reject(err, "devx: CQ 0x%x: the DEVX queue engine refused it: no data path", cqn);
  }
}

void AttachQp(ibv_context* context, std::span<const uint8_t> in, uint32_t qpn) {
  if (in.size() < layout::create_qp::kMinInBytes) return;
  const auto qpc = in.subspan(layout::qp_cmd::kQpcByte);
  softverbs_devx_qp desc{};
  const bool has_rq = GetField(qpc, layout::qpc::kRqType) == kRqTypeRegular;
  const bool has_sq = GetField(qpc, layout::qpc::kNoSq) == 0;
  desc.rq_wqe_cnt = has_rq ? 1u << GetField(qpc, layout::qpc::kLogRqSize) : 0;
  desc.rq_wqe_size = 16u << GetField(qpc, layout::qpc::kLogRqStride);
  desc.sq_wqebb_cnt = has_sq ? 1u << GetField(qpc, layout::qpc::kLogSqSize) : 0;
  const uint64_t rq_bytes = uint64_t{desc.rq_wqe_cnt} * desc.rq_wqe_size;
  const uint64_t sq_bytes = uint64_t{desc.sq_wqebb_cnt} * kSendWqeBb;
  uint8_t* wq =
      UmemAddress(context, GetField(in, layout::create_qp::kWqUmemId),
                  devx::GetField64(in, layout::create_qp::kWqUmemOffset), rq_bytes + sq_bytes);
  desc.dbr = reinterpret_cast<volatile uint32_t*>(
      UmemAddress(context, GetField(qpc, layout::qpc::kDbrUmemId),
                  devx::GetField64(qpc, layout::qpc::kDbrAddr), 8));
  if ((rq_bytes + sq_bytes != 0 && wq == nullptr) || desc.dbr == nullptr) {
    Reject(0, "devx: QP 0x%x: its queues or doorbell record are not inside its UMEMs: no data path",
           qpn);
    return;
  }
  desc.rq_buf = wq;
  desc.sq_buf = wq == nullptr ? nullptr : wq + rq_bytes;  // the SQ follows the RQ (PRM)
  if (int err = softverbs_devx_attach_qp(context, qpn, &desc)) {
    Reject(err, "devx: QP 0x%x: the DEVX queue engine refused it: no data path", qpn);
  }
}

}  // namespace

void NoteUmem(ibv_context* context, uint32_t id, void* addr, uint64_t size) {
  std::lock_guard lock(umems_mutex);
  (*umems)[id] = {context, static_cast<uint8_t*>(addr), size};
}

void ForgetUmem(uint32_t id) {
  std::lock_guard lock(umems_mutex);
  umems->erase(id);
}

void NoteDevxCreated(ibv_context* context, const void* in, size_t inlen, uint64_t handle) {
  const std::span<const uint8_t> box(static_cast<const uint8_t*>(in), inlen);
  if (inlen < layout::in_hdr::kBytes) return;
  const uint32_t number = devx::ObjectNumberOf(handle);
  switch (OpcodeOf(box)) {
    case opcode::kCreateCq:
      AttachCq(context, box, number);
      break;
    case opcode::kCreateQp:
      AttachQp(context, box, number);
      break;
    default:
      break;
  }
}

void NoteDevxModified(ibv_context* context, const void* in, size_t inlen, uint64_t handle) {
  const std::span<const uint8_t> box(static_cast<const uint8_t*>(in), inlen);
  if (inlen < layout::qp_cmd::kQpcByte + layout::qpc::kBytes) return;
  const uint16_t op = OpcodeOf(box);
  if (op != opcode::kRtr2RtsQp && op != opcode::kRts2RtsQp) return;
  const auto qpc = box.subspan(layout::qp_cmd::kQpcByte);
  softverbs_devx_set_qp_timers(context, devx::ObjectNumberOf(handle),
                               static_cast<uint8_t>(GetField(qpc, layout::qpc::kPrimaryAckTimeout)),
                               static_cast<uint8_t>(GetField(qpc, layout::qpc::kRetryCount)),
                               static_cast<uint8_t>(GetField(qpc, layout::qpc::kRnrRetry)));
}

void NoteDevxDestroyed(ibv_context* context, uint64_t handle) {
  const uint16_t creator = devx::CreatorOpcodeOf(handle);
  if (creator == opcode::kCreateCq)
    softverbs_devx_detach(context, kCqKind, devx::ObjectNumberOf(handle));
  if (creator == opcode::kCreateQp)
    softverbs_devx_detach(context, kQpKind, devx::ObjectNumberOf(handle));
}

}  // namespace softverbs::mlx5
