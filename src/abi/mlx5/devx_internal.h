// Shared by the DEVX files of libmlx5.so.1: the library's own definitions of
// the opaque mlx5dv objects and the one call that sends a PRM box to the
// daemon's emulated firmware (through libibverbs' softverbs_call).
#pragma once

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "abi/ibverbs/reject.h"
#include "protocol/devx_messages.h"

// Marks a strong definition that replaces unsupported.cc's weak stub.
#define SV_MLX5_EXPORT extern "C" __attribute__((visibility("default")))

// Opaque in mlx5dv.h; ours: the context it belongs to and the handle the
// daemon knows it by (the kernel's encoding, creator opcode << 32 | number).
struct mlx5dv_devx_obj {
  ibv_context* context;
  uint64_t handle;
};

namespace softverbs::mlx5 {

// Runs one box through `entry_point`. Returns 0, EREMOTEIO (`out` holds the
// firmware's status and syndrome) or an errno from the kernel layer or the
// transport (`out` untouched). On a successful create, *created receives the
// new object's handle.
// Every failure is explained on the log channel under `verb` (default: the
// mlx5dv_devx_* call of the entry point), the firmware's and the kernel
// layer's with the rule the daemon reported.
int RunDevxCommand(ibv_context* context, protocol::DevxEntryPoint entry_point, uint64_t handle,
                   const void* in, size_t inlen, void* out, size_t outlen,
                   uint64_t* created = nullptr, const char* verb = nullptr);

// Sends a fixed-size request and receives a fixed-size reply.
int CallDaemon(ibv_context* context, protocol::Op op, const void* req, size_t req_len, void* rep,
               size_t rep_len);

// The "return the errno value" convention of mlx5dv; a failure sets errno
// too, for callers that print it.
inline int ReturnErrno(int err) {
  if (err) errno = err;
  return err;
}

// The DEVX data path (devx_queues.cc): UMEM ranges by id, and the hooks
// that hand a created CQ/QP's buffers to the context's DEVX queue engine.
void NoteUmem(ibv_context* context, uint32_t id, void* addr, uint64_t size);
void ForgetUmem(uint32_t id);
void NoteDevxCreated(ibv_context* context, const void* in, size_t inlen, uint64_t handle);
void NoteDevxModified(ibv_context* context, const void* in, size_t inlen, uint64_t handle);
void NoteDevxDestroyed(ibv_context* context, uint64_t handle);

using abi::Reject;
using abi::RejectNull;

}  // namespace softverbs::mlx5
