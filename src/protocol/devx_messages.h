// Wire structs of the DEVX requests (mlx5dv_devx_* in libmlx5.so.1 ->
// softverbsd). The PRM boxes travel as opaque bytes after a small fixed
// header; the daemon's emulated firmware (src/devx) interprets them.
//
// A DEVX command is never rejected at the protocol level once it is well
// formed: its outcome (0, EREMOTEIO with the out box filled, or a kernel-layer
// errno such as EINVAL) comes back in DevxCommandReply::result, because a
// protocol-level error carries no reply body and EREMOTEIO needs the out box.
#pragma once

#include <cstddef>
#include <cstdint>

#include "protocol/messages.h"

namespace softverbs::protocol {

// The DEVX methods a box can be sent through (the kernel's entry points).
enum class DevxEntryPoint : uint32_t {
  kObjCreate = 1,
  kObjModify = 2,
  kObjQuery = 3,
  kGeneralCmd = 4,
};

// Largest input or output box: what fits one SOCK_SEQPACKET message with the
// headers. The largest boxes real users send are QUERY_HCA_CAP's answer
// (16 + 4096 bytes) and CREATE_QP (0x110 + PAS); 60 KiB leaves room.
inline constexpr size_t kMaxDevxBox = 60 * 1024;

// kDevxOpen: gives the context's client a DEVX uid (mlx5dv_open_device with
// MLX5DV_CONTEXT_FLAGS_DEVX). Idempotent. Request body: HandleRequest (unused).
struct DevxOpenReply {
  uint32_t uid;
  uint32_t reserved;
};
static_assert(sizeof(DevxOpenReply) == 8);

// kDevxCommand: one create/modify/query/general call. The input box follows.
struct DevxCommandRequest {
  uint32_t entry_point;  // DevxEntryPoint
  uint32_t out_len;      // bytes of output box the caller asked for
  uint64_t handle;       // modify/query: the object the caller holds
};
static_assert(sizeof(DevxCommandRequest) == 16);

// The output box (out_len bytes) follows.
struct DevxCommandReply {
  int32_t result;    // 0, EREMOTEIO (box holds status and syndrome), or an errno
  uint32_t out_len;  // bytes of box that follow: 0 for a kernel-layer errno
  uint64_t handle;   // create: the new object's handle
};
static_assert(sizeof(DevxCommandReply) == 16);

static_assert(sizeof(RequestHeader) + sizeof(DevxCommandRequest) + kMaxDevxBox <= kMaxMessageSize,
              "a max-size DEVX input box must fit one message");
static_assert(sizeof(ReplyHeader) + sizeof(DevxCommandReply) + kMaxDevxBox <= kMaxMessageSize,
              "a max-size DEVX output box must fit one message");

// kDevxDestroy: mlx5dv_devx_obj_destroy. The verdict is the result (EBUSY
// when another object still uses it; the object is then kept).
struct DevxDestroyRequest {
  uint64_t handle;
};
static_assert(sizeof(DevxDestroyRequest) == 8);

// kDevxUmemReg: mlx5dv_devx_umem_reg. The daemon records the range; the
// firmware checks that objects name UMEMs of their own context.
struct DevxUmemRegRequest {
  uint64_t addr;
  uint64_t size;
  uint32_t access;  // IBV_ACCESS_LOCAL_WRITE | _REMOTE_WRITE | _REMOTE_READ
  uint32_t reserved;
};
static_assert(sizeof(DevxUmemRegRequest) == 24);

struct DevxUmemRegReply {
  uint32_t umem_id;
  uint32_t reserved;
};
static_assert(sizeof(DevxUmemRegReply) == 8);

// kDevxUmemDereg: the verdict is EBUSY while a DEVX object uses the UMEM.
struct DevxUmemDeregRequest {
  uint32_t umem_id;
  uint32_t reserved;
};
static_assert(sizeof(DevxUmemDeregRequest) == 8);

// kDevxQueueFiles: the files behind a DEVX queue of the caller, for the
// library's DEVX queue engine (docs/devx.md, "Data path"). The daemon keeps a
// shadow of every DEVX CQ (a CQ ring that peers push completions into, which
// the engine turns into CQEs) and of every DEVX QP (a receive queue peers
// claim from, published in the device table like any QP).
enum class DevxQueueKind : uint32_t {
  kCq = 1,  // reply fds: the CQ's shadow ring
  kQp = 2,  // reply fds: receive queue, send CQ ring, receive CQ ring
};
struct DevxQueueFilesRequest {
  uint32_t kind;    // DevxQueueKind
  uint32_t number;  // CQN or QPN (of an object this client created through DEVX)
};
static_assert(sizeof(DevxQueueFilesRequest) == 8);
struct DevxQueueFilesReply {
  uint32_t send_cqn;  // kQp: the CQs the QP completes on (DEVX or verbs CQs)
  uint32_t recv_cqn;
};
static_assert(sizeof(DevxQueueFilesReply) == 8);

}  // namespace softverbs::protocol
