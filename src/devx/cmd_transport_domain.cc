// ALLOC_TRANSPORT_DOMAIN / DEALLOC_TRANSPORT_DOMAIN. Verbs has no transport
// domains, so their numbers are the firmware's own.
#include "handlers.h"
#include "prm_command_layouts.h"
#include "prm_opcodes.h"

namespace softverbs::devx {

Check AllocTransportDomain(Command& command) {
  const uint32_t limit = command.state.device.Caps().max_transport_domains;
  const auto number = command.state.transport_domains.Alloc(limit);
  if (!number) return Check::kTdLimit;
  InsertCreated(command, opcode::kAllocTransportDomain, *number);
  ReportObjectNumber(command, *number);
  return Check::kPassed;
}

Check DeallocTransportDomain(Command& command) {
  const uint32_t number = GetField(command.in, layout::kObjectNumber);
  FirmwareObject* domain = FindOwned(command, opcode::kAllocTransportDomain, number);
  if (domain == nullptr) return Check::kTdNotFound;
  command.state.transport_domains.Free(number);
  command.state.objects.Erase(domain->handle);
  return Check::kPassed;
}

}  // namespace softverbs::devx
