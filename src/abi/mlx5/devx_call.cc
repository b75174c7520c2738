// The transport of DEVX boxes: one kDevxCommand request per call, answered by
// the daemon's emulated firmware.
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

int RunDevxCommand(ibv_context* context, protocol::DevxEntryPoint entry_point, uint64_t handle,
                   const void* in, size_t inlen, void* out, size_t outlen, uint64_t* created) {
  if (context == nullptr || (in == nullptr && inlen) || (out == nullptr && outlen)) return EINVAL;
  // Boxes beyond one message cannot travel; no PRM command needs that much.
  if (inlen > protocol::kMaxDevxBox || outlen > protocol::kMaxDevxBox) return EINVAL;
  std::vector<uint8_t> request(sizeof(protocol::DevxCommandRequest) + inlen);
  const protocol::DevxCommandRequest header{static_cast<uint32_t>(entry_point),
                                            static_cast<uint32_t>(outlen), handle};
  memcpy(request.data(), &header, sizeof(header));
  if (inlen) memcpy(request.data() + sizeof(header), in, inlen);

  std::vector<uint8_t> reply(sizeof(protocol::DevxCommandReply) + outlen);
  size_t reply_len = 0;
  if (int err =
          softverbs_call(context, static_cast<uint16_t>(protocol::Op::kDevxCommand), request.data(),
                         request.size(), reply.data(), reply.size(), &reply_len, nullptr, 0)) {
    return err;
  }
  protocol::DevxCommandReply rep;
  if (reply_len < sizeof(rep)) return EPROTO;
  memcpy(&rep, reply.data(), sizeof(rep));
  if (rep.out_len > outlen || sizeof(rep) + rep.out_len > reply_len) return EPROTO;
  if (rep.out_len) memcpy(out, reply.data() + sizeof(rep), rep.out_len);
  if (rep.result == 0 && created) *created = rep.handle;
  return rep.result;
}

}  // namespace softverbs::mlx5
