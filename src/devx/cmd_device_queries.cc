// QUERY_HCA_CAP, QUERY_HCA_VPORT_CONTEXT, QUERY_ADAPTER and NOP: the
// general commands that describe the device. They create nothing.
#include "handlers.h"
#include "hca_cap_tables.h"
#include "prm_cap_layouts.h"
#include "prm_command_layouts.h"

namespace softverbs::devx {
namespace {

using namespace layout;

// Capability types this device has none of: a zeroed structure says "no
// such offloads", which is what DPDK and UCX probe for. Device memory: the
// DM of ibv_alloc_dm is not MEMIC (no BAR, no MEMIC atomic operations).
constexpr uint32_t kAbsentCapTypes[] = {
    hca_cap_type::kEthernetOffloads, hca_cap_type::kOdp,
    hca_cap_type::kAtomic,           hca_cap_type::kRoce,
    hca_cap_type::kNicFlowTable,     hca_cap_type::kQos,
    hca_cap_type::kDeviceMemory,
};

bool IsAbsentCapType(uint32_t type) {
  for (uint32_t absent : kAbsentCapTypes) {
    if (absent == type) return true;
  }
  return false;
}

// PCI vendor of the emulated adapter (ibv vendor_id is the IEEE OUI).
constexpr uint32_t kPciVendorMellanox = 0x15b3;

}  // namespace

Check QueryHcaCap(Command& command) {
  if (GetField(command.in, query_hca_cap::kOtherFunction)) return Check::kCapOtherFunction;
  // op_mod = (type << 1) | current; max and current are the same here.
  const uint32_t type = command.OpMod() >> 1;
  const auto cap = SubBox(std::span<uint8_t>(command.out), query_hca_cap::kCapabilityByte);
  const DeviceCaps caps = command.state.device.Caps();
  if (type == hca_cap_type::kGeneral) {
    WriteGeneralCaps(caps, cap);
  } else if (type == hca_cap_type::kGeneral2) {
    WriteGeneralCaps2(caps, cap);
  } else if (!IsAbsentCapType(type)) {
    return Check::kCapUnknownType;
  }
  return Check::kPassed;
}

Check QueryHcaVportContext(Command& command) {
  if (GetField(command.in, query_hca_vport_context::kOtherVport)) return Check::kVportOtherVport;
  const DeviceCaps caps = command.state.device.Caps();
  // With one port users send port_num 0; with more, the port number.
  if (GetField(command.in, query_hca_vport_context::kPortNum) > caps.phys_port_cnt) {
    return Check::kVportBadPort;
  }
  WriteHcaVportContext(
      caps, SubBox(std::span<uint8_t>(command.out), query_hca_vport_context::kContextByte));
  return Check::kPassed;
}

Check QueryAdapter(Command& command) {
  const auto block = SubBox(std::span<uint8_t>(command.out), query_adapter::kParamBlockByte);
  SetField(block, adapter::kIeeeVendorId, command.state.device.Caps().vendor_id);
  SetField(block, adapter::kVsdVendorId, kPciVendorMellanox);
  return Check::kPassed;
}

Check Nop(Command&) {
  return Check::kPassed;
}

}  // namespace softverbs::devx
