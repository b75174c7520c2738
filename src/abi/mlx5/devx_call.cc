// The transport of DEVX boxes: one kDevxCommand request per call, answered by
// the daemon's emulated firmware.
#include <algorithm>
#include <cstring>
#include <vector>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"

namespace softverbs::mlx5 {

int CallDaemon(ibv_context* context, protocol::Op op, const void* req, size_t req_len, void* rep,
               size_t rep_len) {
  return softverbs_call(context, static_cast<uint16_t>(op), req, req_len, rep, rep_len, nullptr,
                        nullptr, 0);
}

namespace {

const char* VerbOf(protocol::DevxEntryPoint entry_point) {
  switch (entry_point) {
    case protocol::DevxEntryPoint::kObjCreate:
      return "mlx5dv_devx_obj_create";
    case protocol::DevxEntryPoint::kObjModify:
      return "mlx5dv_devx_obj_modify";
    case protocol::DevxEntryPoint::kObjQuery:
      return "mlx5dv_devx_obj_query";
    case protocol::DevxEntryPoint::kGeneralCmd:
      return "mlx5dv_devx_general_cmd";
  }
  return "mlx5dv_devx";
}

// Room after the out box for the rule the daemon reports with a failure.
constexpr size_t kMaxReason = 512;

}  // namespace

int RunDevxCommand(ibv_context* context, protocol::DevxEntryPoint entry_point, uint64_t handle,
                   const void* in, size_t inlen, void* out, size_t outlen, uint64_t* created,
                   const char* verb) {
  if (verb == nullptr) verb = VerbOf(entry_point);
  if (context == nullptr) return Reject(EINVAL, "%s: context is NULL", verb);
  if ((in == nullptr && inlen) || (out == nullptr && outlen)) {
    return Reject(EINVAL, "%s: %s is NULL with a length of %zu", verb,
                  in == nullptr && inlen ? "in" : "out", in == nullptr && inlen ? inlen : outlen);
  }
  // Boxes beyond one message cannot travel; no PRM command needs that much.
  if (inlen > protocol::kMaxDevxBox || outlen > protocol::kMaxDevxBox) {
    return Reject(EINVAL, "%s: inlen %zu / outlen %zu: a box is larger than %zu bytes", verb, inlen,
                  outlen, protocol::kMaxDevxBox);
  }
  std::vector<uint8_t> request(sizeof(protocol::DevxCommandRequest) + inlen);
  const protocol::DevxCommandRequest header{static_cast<uint32_t>(entry_point),
                                            static_cast<uint32_t>(outlen), handle};
  memcpy(request.data(), &header, sizeof(header));
  if (inlen) memcpy(request.data() + sizeof(header), in, inlen);

  std::vector<uint8_t> reply(sizeof(protocol::DevxCommandReply) + outlen + kMaxReason);
  size_t reply_len = 0;
  if (int err =
          softverbs_call(context, static_cast<uint16_t>(protocol::Op::kDevxCommand), request.data(),
                         request.size(), reply.data(), reply.size(), &reply_len, nullptr, 0)) {
    return err;  // DaemonChannel::Call explained it
  }
  protocol::DevxCommandReply rep;
  if (reply_len < sizeof(rep)) return Reject(EPROTO, "%s: a malformed reply from the daemon", verb);
  memcpy(&rep, reply.data(), sizeof(rep));
  if (rep.out_len > outlen || sizeof(rep) + rep.out_len > reply_len) {
    return Reject(EPROTO, "%s: a malformed reply from the daemon", verb);
  }
  if (rep.out_len) memcpy(out, reply.data() + sizeof(rep), rep.out_len);
  if (rep.result == 0 && created) *created = rep.handle;
  if (rep.result != 0) {
    // The rule the firmware or the kernel layer broke follows the out box.
    const size_t used = sizeof(rep) + rep.out_len;
    const size_t why_len = std::min(reply_len, reply.size()) - used;
    return Reject(rep.result, "%s failed (%s): %.*s", verb, strerror(rep.result),
                  static_cast<int>(why_len), reinterpret_cast<const char*>(reply.data() + used));
  }
  return rep.result;
}

}  // namespace softverbs::mlx5
