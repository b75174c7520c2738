// What the kernel's DEVX layer (drivers/infiniband/hw/mlx5/devx.c) decides
// before a command reaches firmware: which entry point accepts which opcode
// (spec §2.2), the target-object check of modify/query (§2.4), the uid the
// command runs with (§2.1) and the fields it forces (§2.5). Its rejections are
// plain errnos (EINVAL), never firmware statuses.
#ifndef SOFTVERBS_DEVX_KERNEL_GATE_H_
#define SOFTVERBS_DEVX_KERNEL_GATE_H_

#include <cstdint>
#include <optional>
#include <span>

#include "object_handle.h"

namespace softverbs::devx {

// The DEVX methods of the kernel, one per mlx5dv_devx_* call.
enum class EntryPoint {
  kObjCreate,   // mlx5dv_devx_obj_create
  kObjModify,   // mlx5dv_devx_obj_modify
  kObjQuery,    // mlx5dv_devx_obj_query and _query_async
  kObjDestroy,  // mlx5dv_devx_obj_destroy and context teardown
  kGeneralCmd,  // mlx5dv_devx_general_cmd
};

// devx_is_obj_create_cmd / _modify_ / _query_ / devx_is_general_cmd.
// kObjDestroy accepts no user box at all.
bool AcceptedBy(EntryPoint entry_point, uint16_t opcode, uint16_t op_mod);

// QUERY_HCA_CAP, QUERY_HCA_VPORT_CONTEXT, QUERY_ESW_VPORT_CONTEXT: allowed on
// a context opened without the DEVX flag.
bool IsWhitelisted(uint16_t opcode);

// devx_get_obj_id: the handle the object named inside a modify/query box
// would have. nullopt for opcodes whose target this layer cannot name.
std::optional<ObjectHandle> TargetHandleOf(std::span<const uint8_t> in);

// devx_set_umem_valid: DEVX objects always use UMEMs, never PAS lists.
void ForceUmemMode(std::span<uint8_t> in);

// The kernel's own length check (only CREATE_MKEY has one: the box must
// cover the mkc).
bool InputLongEnoughForKernel(uint16_t opcode, size_t in_bytes);

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_KERNEL_GATE_H_
