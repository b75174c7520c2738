// ALLOC_PD / DEALLOC_PD. PD numbers come from the daemon's PD table, which
// verbs PDs share, so a PDN is unique whichever way it was allocated.
#include "handlers.h"
#include "prm_command_layouts.h"
#include "prm_opcodes.h"

namespace softverbs::devx {

Check AllocPd(Command& command) {
  const uint32_t pdn = command.state.device.AllocNumber(ResourceKind::kPd);
  if (pdn == 0) return Check::kPdNumbersExhausted;
  InsertCreated(command, opcode::kAllocPd, pdn);
  ReportObjectNumber(command, pdn);
  return Check::kPassed;
}

Check DeallocPd(Command& command) {
  const uint32_t pdn = GetField(command.in, layout::kObjectNumber);
  FirmwareObject* pd = FindOwned(command, opcode::kAllocPd, pdn);
  if (pd == nullptr) return Check::kPdNotFound;
  if (pd->referrers > 0) return Check::kPdInUse;
  command.state.device.FreeNumber(ResourceKind::kPd, pdn);
  command.state.objects.Erase(pd->handle);
  return Check::kPassed;
}

}  // namespace softverbs::devx
