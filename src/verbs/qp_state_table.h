// The QP state table as Linux enforces it (ib_modify_qp_is_ok's
// qp_state_table; spec xrc-and-qp-states.md §2.3-§2.4): which (cur -> next)
// transitions exist and, per QP type, which ibv_qp_attr_mask bits each one
// requires and which it merely allows. IBV_QP_STATE is always allowed on top.
#ifndef SOFTVERBS_VERBS_QP_STATE_TABLE_H_
#define SOFTVERBS_VERBS_QP_STATE_TABLE_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <span>

namespace softverbs::verbs {

// The QP types that have a column in the table. Several ibv_qp_type values
// share a column (see QpTableColumnFor).
enum class QpTableColumn : uint8_t { kUd, kUc, kRc, kXrcIni, kXrcTgt, kRawPacket };

struct QpTransitionMasks {
  uint32_t required = 0;  // every bit must be present
  uint32_t optional = 0;  // may be present
};

// One valid (cur -> next) cell. A type left at {} accepts IBV_QP_STATE only.
struct QpTransitionRule {
  ibv_qp_state cur;
  ibv_qp_state next;
  QpTransitionMasks ud;
  QpTransitionMasks uc;
  QpTransitionMasks rc;
  QpTransitionMasks xrc_ini;
  QpTransitionMasks xrc_tgt;
  QpTransitionMasks raw_packet;
};

// Column of `type`: XRC_SEND and the legacy IBV_QPT_XRC (5) use XRC_INI,
// XRC_RECV uses XRC_TGT. nullopt for types without modify rules (DRIVER, ...).
std::optional<QpTableColumn> QpTableColumnFor(ibv_qp_type type);

// All valid cells, one row each; a pair without a row is never valid.
std::span<const QpTransitionRule> QpTransitionRules();

// The row for (cur, next), or nullptr if that transition does not exist.
const QpTransitionRule* FindQpTransition(ibv_qp_state cur, ibv_qp_state next);

// The masks of `rule` for one column.
const QpTransitionMasks& MasksFor(const QpTransitionRule& rule, QpTableColumn column);

}  // namespace softverbs::verbs

#endif  // SOFTVERBS_VERBS_QP_STATE_TABLE_H_
