// The firmware's opcode -> handler table, and the destroy command the kernel
// builds for each kind of created object (spec §2.2 "destroy command built").
#ifndef SOFTVERBS_DEVX_COMMAND_TABLE_H_
#define SOFTVERBS_DEVX_COMMAND_TABLE_H_

#include <cstddef>
#include <cstdint>

#include "command.h"
#include "prm_bits.h"

namespace softverbs::devx {

struct CommandSpec {
  uint16_t opcode;
  const char* name;
  size_t out_bytes;  // full size of the answer; the caller may ask for less
  Handler handler;
};

// nullptr for an opcode this firmware does not execute (-> BAD_OP).
const CommandSpec* FindCommand(uint16_t opcode);

struct DestroyRule {
  uint16_t creator_opcode;
  uint16_t destroy_opcode;
  Field number;  // where the destroy box names the object
};

const DestroyRule* FindDestroyRule(uint16_t creator_opcode);

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_COMMAND_TABLE_H_
