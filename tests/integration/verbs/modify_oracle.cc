#include "modify_oracle.h"

#include <array>

namespace softverbs::it {
namespace {

// States by value: RESET 0, INIT 1, RTR 2, RTS 3, SQD 4, SQE 5, ERR 6.
struct Row {
  int cur;
  int next;
  // {required, optional} per type, columns UD, UC, RC, XRC_INI, XRC_TGT.
  std::array<std::array<uint32_t, 2>, 5> masks;
};

constexpr std::array<uint32_t, 2> kNone = {0x0, 0x0};

// §2.3 valid cells with §2.4 masks. Cells listed with kNone everywhere accept
// IBV_QP_STATE only.
constexpr Row kTable[] = {
    {0, 0, {kNone, kNone, kNone, kNone, kNone}},                                  // RESET->RESET
    {0, 1, {{{0x70, 0x0}, {0x38, 0x0}, {0x38, 0x0}, {0x38, 0x0}, {0x38, 0x0}}}},  // RESET->INIT
    {1, 0, {kNone, kNone, kNone, kNone, kNone}},                                  // INIT->RESET
    {1, 1, {{{0x0, 0x70}, {0x0, 0x38}, {0x0, 0x38}, {0x0, 0x38}, {0x0, 0x38}}}},  // INIT->INIT
    {1,
     2,
     {{{0x0, 0x50},
       {0x101180, 0x4018},
       {0x129180, 0x4018},
       {0x101180, 0x4018},
       {0x129180, 0x4018}}}},                     // INIT->RTR
    {1, 6, {kNone, kNone, kNone, kNone, kNone}},  // INIT->ERR
    {2, 0, {kNone, kNone, kNone, kNone, kNone}},  // RTR->RESET
    {2,
     3,
     {{{0x10000, 0x42},
       {0x10000, 0x4400a},
       {0x12e00, 0x4c00a},
       {0x12e00, 0x4400a},
       {0x10200, 0x4c00a}}}},                     // RTR->RTS
    {2, 6, {kNone, kNone, kNone, kNone, kNone}},  // RTR->ERR
    {3, 0, {kNone, kNone, kNone, kNone, kNone}},  // RTS->RESET
    {3,
     3,
     {{{0x0, 0x42}, {0x0, 0x4400a}, {0x0, 0x4c00a}, {0x0, 0x4400a}, {0x0, 0x4c00a}}}},  // RTS->RTS
    {3, 4, {{{0x0, 0x4}, {0x0, 0x4}, {0x0, 0x4}, {0x0, 0x4}, {0x0, 0x4}}}},             // RTS->SQD
    {3, 6, {kNone, kNone, kNone, kNone, kNone}},                                        // RTS->ERR
    {4, 0, {kNone, kNone, kNone, kNone, kNone}},  // SQD->RESET
    {4,
     3,
     {{{0x0, 0x42}, {0x0, 0x4400a}, {0x0, 0x4c00a}, {0x0, 0x4400a}, {0x0, 0x4c00a}}}},  // SQD->RTS
    {4,
     4,
     {{{0x0, 0x50}, {0x0, 0x44098}, {0x0, 0x6eeb8}, {0x0, 0x46eb8}, {0x0, 0x6c2b8}}}},  // SQD->SQD
    {4, 6, {kNone, kNone, kNone, kNone, kNone}},                                        // SQD->ERR
    {5, 0, {kNone, kNone, kNone, kNone, kNone}},               // SQE->RESET
    {5, 3, {{{0x0, 0x42}, {0x0, 0xa}, kNone, kNone, kNone}}},  // SQE->RTS
    {5, 6, {kNone, kNone, kNone, kNone, kNone}},               // SQE->ERR
    {6, 0, {kNone, kNone, kNone, kNone, kNone}},               // ERR->RESET
    {6, 6, {kNone, kNone, kNone, kNone, kNone}},               // ERR->ERR
};

}  // namespace

std::optional<OracleMasks> OracleCell(ibv_qp_state cur, ibv_qp_state next, OracleType type) {
  for (const Row& row : kTable) {
    if (row.cur == static_cast<int>(cur) && row.next == static_cast<int>(next)) {
      const auto& m = row.masks[static_cast<int>(type)];
      return OracleMasks{m[0], m[1]};
    }
  }
  return std::nullopt;
}

uint32_t OracleStrippedBits(OracleType type) {
  switch (type) {
    case OracleType::kXrcIni:
      return 0x28000;
    case OracleType::kXrcTgt:
      return 0x2c00;
    default:
      return 0;
  }
}

OracleType OracleTypeOf(ibv_qp_type type) {
  switch (type) {
    case IBV_QPT_UD:
      return OracleType::kUd;
    case IBV_QPT_UC:
      return OracleType::kUc;
    case IBV_QPT_XRC_SEND:
      return OracleType::kXrcIni;
    case IBV_QPT_XRC_RECV:
      return OracleType::kXrcTgt;
    default:
      return OracleType::kRc;
  }
}

}  // namespace softverbs::it
