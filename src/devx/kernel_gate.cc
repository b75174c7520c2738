#include "kernel_gate.h"

#include <algorithm>

#include "prm_command_layouts.h"
#include "prm_context_layouts.h"
#include "prm_opcodes.h"

namespace softverbs::devx {
namespace {

// Spec §2.2, "Create" table (SET_FLOW_TABLE_ENTRY only with op_mod 0,
// CREATE_PSV only with num_psv == 1, which this firmware does not execute).
// CREATE_UMEM (0xa08) is not among them: it comes only through umem_reg
// (the kernel's devx_is_obj_create_cmd refuses it: EINVAL).
constexpr uint16_t kCreateOpcodes[] = {
    0xa00, 0x200, 0x400, 0x800, 0x816, 0x90c, 0x904, 0x908, 0x916, 0x900,
    0x912, 0x771, 0x930, 0x933, 0x939, 0x93d, 0x940, 0x782, 0x827, 0x829,
    0x500, 0x700, 0x705, 0x710, 0x717, 0x806, 0x80e, 0x600,
};

// Spec §2.2, "Modify" table (SET_FLOW_TABLE_ENTRY only with op_mod 1).
constexpr uint16_t kModifyOpcodes[] = {
    0xa01, 0x403, 0x90d, 0x905, 0x909, 0x917, 0x901, 0x913, 0x93c,
    0x785, 0x827, 0x829, 0x502, 0x503, 0x50e, 0x504, 0x505, 0x506,
    0x507, 0x50a, 0x708, 0x703, 0x714, 0x71a, 0x726, 0x729, 0x72a,
};

// Spec §2.2, "Query" table.
constexpr uint16_t kQueryOpcodes[] = {
    0xa02, 0x201, 0x402, 0x90f, 0x907, 0x90b, 0x919, 0x903, 0x915, 0x773, 0x932, 0x935, 0x937,
    0x93b, 0x942, 0x784, 0x82a, 0x50b, 0x702, 0x707, 0x713, 0x719, 0x725, 0x727, 0x93f,
};

// Spec §2.2, the general-command allow list (besides [0xb00, 0xd00)).
constexpr uint16_t kGeneralOpcodes[] = {
    0x100, 0x762, 0x752, 0x750, 0x101, 0x10a, 0x754, 0x760,
    0x76f, 0x770, 0x80a, 0x80d, 0x822, 0x824, 0x826, 0x842,
};

constexpr uint16_t kWhitelistOpcodes[] = {0x100, 0x762, 0x752};

template <size_t N>
bool Contains(const uint16_t (&list)[N], uint16_t opcode) {
  return std::find(std::begin(list), std::end(list), opcode) != std::end(list);
}

// Where modify/query commands name their target, and which create opcode
// made it (spec §2.4), for the objects this firmware can create.
struct TargetLocation {
  uint16_t opcode;
  uint16_t creator_opcode;
  Field number;
};

constexpr TargetLocation kTargetLocations[] = {
    {opcode::kQueryMkey, opcode::kCreateMkey, layout::kObjectNumber},
    {opcode::kQueryCq, opcode::kCreateCq, layout::kObjectNumber},
    {opcode::kModifyCq, opcode::kCreateCq, layout::kObjectNumber},
    {opcode::kRst2InitQp, opcode::kCreateQp, layout::qp_cmd::kQpn},
    {opcode::kInit2RtrQp, opcode::kCreateQp, layout::qp_cmd::kQpn},
    {opcode::kInit2InitQp, opcode::kCreateQp, layout::qp_cmd::kQpn},
    {opcode::kRtr2RtsQp, opcode::kCreateQp, layout::qp_cmd::kQpn},
    {opcode::kRts2RtsQp, opcode::kCreateQp, layout::qp_cmd::kQpn},
    {opcode::kSqerr2RtsQp, opcode::kCreateQp, layout::qp_cmd::kQpn},
    {opcode::k2ErrQp, opcode::kCreateQp, layout::qp_cmd::kQpn},
    {opcode::k2RstQp, opcode::kCreateQp, layout::qp_cmd::kQpn},
    {opcode::kQueryQp, opcode::kCreateQp, layout::qp_cmd::kQpn},
    {opcode::kQueryFlowCounter, opcode::kAllocFlowCounter,
     layout::query_flow_counter::kFlowCounterId},
};

}  // namespace

bool AcceptedBy(EntryPoint entry_point, uint16_t opcode, uint16_t op_mod) {
  switch (entry_point) {
    case EntryPoint::kObjCreate:
      if (opcode == opcode::kSetFlowTableEntry) return op_mod == 0;
      return Contains(kCreateOpcodes, opcode);
    case EntryPoint::kObjModify:
      if (opcode == opcode::kSetFlowTableEntry) return op_mod == 1;
      return Contains(kModifyOpcodes, opcode);
    case EntryPoint::kObjQuery:
      return Contains(kQueryOpcodes, opcode);
    case EntryPoint::kGeneralCmd:
      return (opcode >= 0xb00 && opcode < 0xd00) || Contains(kGeneralOpcodes, opcode);
    case EntryPoint::kObjDestroy:
      return false;
  }
  return false;
}

bool IsWhitelisted(uint16_t opcode) {
  return Contains(kWhitelistOpcodes, opcode);
}

std::optional<ObjectHandle> TargetHandleOf(std::span<const uint8_t> in) {
  const auto op = static_cast<uint16_t>(GetField(in, layout::in_hdr::kOpcode));
  if (op == opcode::kModifyGeneralObject || op == opcode::kQueryGeneralObject) {
    return MakeObjectHandle(opcode::kCreateGeneralObject,
                            static_cast<uint16_t>(GetField(in, layout::general_obj_hdr::kObjType)),
                            GetField(in, layout::general_obj_hdr::kObjId));
  }
  for (const TargetLocation& location : kTargetLocations) {
    if (location.opcode == op) {
      return MakeObjectHandle(location.creator_opcode, 0, GetField(in, location.number));
    }
  }
  return std::nullopt;
}

void ForceUmemMode(std::span<uint8_t> in) {
  using namespace layout;
  switch (GetField(in, in_hdr::kOpcode)) {
    case opcode::kCreateCq:
      SetField(in, create_cq::kCqUmemValid, 1);
      SetField(SubBox(in, create_cq::kCqcByte), cqc::kDbrUmemValid, 1);
      break;
    case opcode::kCreateQp:
      SetField(in, create_qp::kWqUmemValid, 1);
      SetField(SubBox(in, qp_cmd::kQpcByte), qpc::kDbrUmemValid, 1);
      break;
    case opcode::kCreateMkey: {
      const auto mkc = SubBox(in, create_mkey::kMkcByte);
      const uint32_t mode =
          GetField(mkc, mkc::kAccessMode4To2) << 2 | GetField(mkc, mkc::kAccessMode1To0);
      // Indirect mkeys (KLM/KSM) point at other mkeys, not at memory.
      if (mode != mkey_access_mode::kKlm && mode != mkey_access_mode::kKsm) {
        SetField(in, create_mkey::kMkeyUmemValid, 1);
      }
      break;
    }
    default:
      break;
  }
}

bool InputLongEnoughForKernel(uint16_t opcode, size_t in_bytes) {
  return opcode != opcode::kCreateMkey || in_bytes >= layout::create_mkey::kMinInBytes;
}

}  // namespace softverbs::devx
