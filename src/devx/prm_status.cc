// Status -> errno and status -> text, as the kernel's cmd.c maps them.
#include <cerrno>

#include "prm_opcodes.h"

namespace softverbs::devx {
namespace {

struct StatusInfo {
  Status status;
  int error;
  const char* name;
};

// Spec §1.3, one row per status.
constexpr StatusInfo kStatusTable[] = {
    {Status::kOk, 0, "OK"},
    {Status::kInternalError, EIO, "internal error"},
    {Status::kBadOp, EINVAL, "bad operation"},
    {Status::kBadParam, EINVAL, "bad parameter"},
    {Status::kBadSystemState, EIO, "bad system state"},
    {Status::kBadResource, EINVAL, "bad resource"},
    {Status::kResourceBusy, EBUSY, "resource busy"},
    {Status::kNotReady, EAGAIN, "FW not ready"},
    {Status::kLimitsExceeded, ENOMEM, "limits exceeded"},
    {Status::kBadResourceState, EINVAL, "bad resource state"},
    {Status::kBadIndex, EINVAL, "bad index"},
    {Status::kNoResources, EAGAIN, "no resources"},
    {Status::kBadQpState, EINVAL, "bad QP state"},
    {Status::kBadPacket, EINVAL, "bad packet (discarded)"},
    {Status::kBadSizeOutstandingCqes, EINVAL, "too many outstanding CQEs"},
    {Status::kBadInputLength, EIO, "bad input length"},
    {Status::kBadOutputLength, EIO, "bad output length"},
};

const StatusInfo* Find(Status status) {
  for (const StatusInfo& info : kStatusTable) {
    if (info.status == status) return &info;
  }
  return nullptr;
}

}  // namespace

int StatusToErrno(Status status) {
  const StatusInfo* info = Find(status);
  return info ? info->error : EIO;  // "unknown status" is EIO in the kernel.
}

const char* StatusName(Status status) {
  const StatusInfo* info = Find(status);
  return info ? info->name : "unknown status";
}

}  // namespace softverbs::devx
