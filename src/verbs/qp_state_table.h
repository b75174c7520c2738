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
// kDci and kDct are mlx5's DC QPs, whose cells are the mlx5 driver's own
// (DcTransitionRules), not the IBA table's.
enum class QpTableColumn : uint8_t { kUd, kUc, kRc, kXrcIni, kXrcTgt, kRawPacket, kDci, kDct };

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

// mlx5's DC QPs follow the mlx5 driver's rules, not ib_modify_qp_is_ok's:
// a DCI those of mlx5_ib's modify_dci_qp_is_ok, a DCT those of
// mlx5_ib_modify_dct (RESET->INIT and INIT->RTR only: a DCT leaves RTR only
// when it is destroyed). A column without masks in a row does not have
// that cell.
struct DcTransitionRule {
  ibv_qp_state cur;
  ibv_qp_state next;
  std::optional<QpTransitionMasks> dci;
  std::optional<QpTransitionMasks> dct;
};

// Column of `type`: XRC_SEND and the legacy IBV_QPT_XRC (5) use XRC_INI,
// XRC_RECV uses XRC_TGT, the DC types (verbs/qp_names.h) their own.
// nullopt for types without modify rules (DRIVER, ...).
std::optional<QpTableColumn> QpTableColumnFor(ibv_qp_type type);

// All valid cells, one row each; a pair without a row is never valid.
std::span<const QpTransitionRule> QpTransitionRules();

// The row for (cur, next), or nullptr if that transition does not exist.
const QpTransitionRule* FindQpTransition(ibv_qp_state cur, ibv_qp_state next);

// The masks of `rule` for one column of the IBA table (not kDci, kDct).
const QpTransitionMasks& MasksFor(const QpTransitionRule& rule, QpTableColumn column);

// All cells of the DC columns, one row each.
std::span<const DcTransitionRule> DcTransitionRules();

// The masks of the (cur -> next) cell of any column, or nullptr if that
// column has no such cell.
const QpTransitionMasks* FindTransitionMasks(QpTableColumn column, ibv_qp_state cur,
                                             ibv_qp_state next);

}  // namespace softverbs::verbs

#endif  // SOFTVERBS_VERBS_QP_STATE_TABLE_H_
