// The oracle of the exhaustive modify test: the QP state table of
// /work/shared/spec/xrc-and-qp-states.md §2.3/§2.4 transcribed literally from
// the spec's hex columns. Deliberately independent of src/verbs: only plain
// numbers, no names shared with the implementation.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>

namespace softverbs::it {

// The QP types under test, in the spec's column order (SMI, GSI and
// RAW_PACKET are not creatable on softverbs).
enum class OracleType { kUd, kUc, kRc, kXrcIni, kXrcTgt };

struct OracleMasks {
  uint32_t required;  // besides IBV_QP_STATE
  uint32_t optional;
};

// The masks of a valid (cur, next) cell for `type`; nullopt if the pair is
// not a valid transition.
std::optional<OracleMasks> OracleCell(ibv_qp_state cur, ibv_qp_state next, OracleType type);

// Bits uverbs drops before the table check (modify_qp_mask): 0x28000 for
// XRC_INI, 0x2c00 for XRC_TGT, 0 otherwise.
uint32_t OracleStrippedBits(OracleType type);

OracleType OracleTypeOf(ibv_qp_type type);

}  // namespace softverbs::it
