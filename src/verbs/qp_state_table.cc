#include "verbs/qp_state_table.h"

#include <array>

#include "verbs/qp_names.h"

namespace softverbs::verbs {
namespace {

// Short names so each row reads like the spec's bit lists.
constexpr uint32_t kCurState = IBV_QP_CUR_STATE;
constexpr uint32_t kSqdNotify = IBV_QP_EN_SQD_ASYNC_NOTIFY;
constexpr uint32_t kAccess = IBV_QP_ACCESS_FLAGS;
constexpr uint32_t kPkey = IBV_QP_PKEY_INDEX;
constexpr uint32_t kPort = IBV_QP_PORT;
constexpr uint32_t kQkey = IBV_QP_QKEY;
constexpr uint32_t kAv = IBV_QP_AV;
constexpr uint32_t kPathMtu = IBV_QP_PATH_MTU;
constexpr uint32_t kTimeout = IBV_QP_TIMEOUT;
constexpr uint32_t kRetryCnt = IBV_QP_RETRY_CNT;
constexpr uint32_t kRnrRetry = IBV_QP_RNR_RETRY;
constexpr uint32_t kRqPsn = IBV_QP_RQ_PSN;
constexpr uint32_t kMaxRdAtomic = IBV_QP_MAX_QP_RD_ATOMIC;
constexpr uint32_t kAltPath = IBV_QP_ALT_PATH;
constexpr uint32_t kMinRnrTimer = IBV_QP_MIN_RNR_TIMER;
constexpr uint32_t kSqPsn = IBV_QP_SQ_PSN;
constexpr uint32_t kMaxDestRdAtomic = IBV_QP_MAX_DEST_RD_ATOMIC;
constexpr uint32_t kPathMigState = IBV_QP_PATH_MIG_STATE;
constexpr uint32_t kDestQpn = IBV_QP_DEST_QPN;
constexpr uint32_t kRateLimit = IBV_QP_RATE_LIMIT;

// Spec §2.3 (valid cells) and §2.4 (masks). Rows ordered by cur, then next.
// Cells that only accept IBV_QP_STATE (RESET->RESET, *->RESET, *->ERR) have
// every column left empty. SMI/GSI columns are omitted: no user QP has them.
constexpr std::array kRules = {
    QpTransitionRule{.cur = IBV_QPS_RESET, .next = IBV_QPS_RESET},
    QpTransitionRule{
        .cur = IBV_QPS_RESET,
        .next = IBV_QPS_INIT,
        .ud = {.required = kPkey | kPort | kQkey},
        .uc = {.required = kPkey | kPort | kAccess},
        .rc = {.required = kPkey | kPort | kAccess},
        .xrc_ini = {.required = kPkey | kPort | kAccess},
        .xrc_tgt = {.required = kPkey | kPort | kAccess},
        .raw_packet = {.required = kPort},
    },

    QpTransitionRule{.cur = IBV_QPS_INIT, .next = IBV_QPS_RESET},
    QpTransitionRule{
        .cur = IBV_QPS_INIT,
        .next = IBV_QPS_INIT,
        .ud = {.optional = kPkey | kPort | kQkey},
        .uc = {.optional = kPkey | kPort | kAccess},
        .rc = {.optional = kPkey | kPort | kAccess},
        .xrc_ini = {.optional = kPkey | kPort | kAccess},
        .xrc_tgt = {.optional = kPkey | kPort | kAccess},
    },
    QpTransitionRule{
        .cur = IBV_QPS_INIT,
        .next = IBV_QPS_RTR,
        .ud = {.optional = kPkey | kQkey},
        .uc = {.required = kAv | kPathMtu | kDestQpn | kRqPsn,
               .optional = kAltPath | kAccess | kPkey},
        .rc = {.required = kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
               .optional = kAltPath | kAccess | kPkey},
        .xrc_ini = {.required = kAv | kPathMtu | kDestQpn | kRqPsn,
                    .optional = kAltPath | kAccess | kPkey},
        .xrc_tgt = {.required =
                        kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                    .optional = kAltPath | kAccess | kPkey},
    },
    QpTransitionRule{.cur = IBV_QPS_INIT, .next = IBV_QPS_ERR},

    QpTransitionRule{.cur = IBV_QPS_RTR, .next = IBV_QPS_RESET},
    QpTransitionRule{
        .cur = IBV_QPS_RTR,
        .next = IBV_QPS_RTS,
        .ud = {.required = kSqPsn, .optional = kCurState | kQkey},
        .uc = {.required = kSqPsn, .optional = kCurState | kAltPath | kAccess | kPathMigState},
        .rc = {.required = kTimeout | kRetryCnt | kRnrRetry | kSqPsn | kMaxRdAtomic,
               .optional = kCurState | kAltPath | kAccess | kMinRnrTimer | kPathMigState},
        .xrc_ini = {.required = kTimeout | kRetryCnt | kRnrRetry | kSqPsn | kMaxRdAtomic,
                    .optional = kCurState | kAltPath | kAccess | kPathMigState},
        .xrc_tgt = {.required = kTimeout | kSqPsn,
                    .optional = kCurState | kAltPath | kAccess | kMinRnrTimer | kPathMigState},
        .raw_packet = {.optional = kRateLimit},
    },
    QpTransitionRule{.cur = IBV_QPS_RTR, .next = IBV_QPS_ERR},

    QpTransitionRule{.cur = IBV_QPS_RTS, .next = IBV_QPS_RESET},
    QpTransitionRule{
        .cur = IBV_QPS_RTS,
        .next = IBV_QPS_RTS,
        .ud = {.optional = kCurState | kQkey},
        .uc = {.optional = kCurState | kAccess | kAltPath | kPathMigState},
        .rc = {.optional = kCurState | kAccess | kAltPath | kPathMigState | kMinRnrTimer},
        .xrc_ini = {.optional = kCurState | kAccess | kAltPath | kPathMigState},
        .xrc_tgt = {.optional = kCurState | kAccess | kAltPath | kPathMigState | kMinRnrTimer},
        .raw_packet = {.optional = kRateLimit},
    },
    QpTransitionRule{
        .cur = IBV_QPS_RTS,
        .next = IBV_QPS_SQD,
        .ud = {.optional = kSqdNotify},
        .uc = {.optional = kSqdNotify},
        .rc = {.optional = kSqdNotify},
        .xrc_ini = {.optional = kSqdNotify},
        .xrc_tgt = {.optional = kSqdNotify},
    },
    QpTransitionRule{.cur = IBV_QPS_RTS, .next = IBV_QPS_ERR},

    QpTransitionRule{.cur = IBV_QPS_SQD, .next = IBV_QPS_RESET},
    QpTransitionRule{
        .cur = IBV_QPS_SQD,
        .next = IBV_QPS_RTS,
        .ud = {.optional = kCurState | kQkey},
        .uc = {.optional = kCurState | kAltPath | kAccess | kPathMigState},
        .rc = {.optional = kCurState | kAltPath | kAccess | kMinRnrTimer | kPathMigState},
        .xrc_ini = {.optional = kCurState | kAltPath | kAccess | kPathMigState},
        .xrc_tgt = {.optional = kCurState | kAltPath | kAccess | kMinRnrTimer | kPathMigState},
    },
    QpTransitionRule{
        .cur = IBV_QPS_SQD,
        .next = IBV_QPS_SQD,
        .ud = {.optional = kPkey | kQkey},
        .uc = {.optional = kAv | kAltPath | kAccess | kPkey | kPathMigState},
        .rc = {.optional = kPort | kAv | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic |
                           kMaxDestRdAtomic | kAltPath | kAccess | kPkey | kMinRnrTimer |
                           kPathMigState},
        .xrc_ini = {.optional = kPort | kAv | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic |
                                kAltPath | kAccess | kPkey | kPathMigState},
        .xrc_tgt = {.optional = kPort | kAv | kTimeout | kMaxDestRdAtomic | kAltPath | kAccess |
                                kPkey | kMinRnrTimer | kPathMigState},
    },
    QpTransitionRule{.cur = IBV_QPS_SQD, .next = IBV_QPS_ERR},

    QpTransitionRule{.cur = IBV_QPS_SQE, .next = IBV_QPS_RESET},
    QpTransitionRule{
        .cur = IBV_QPS_SQE,
        .next = IBV_QPS_RTS,
        .ud = {.optional = kCurState | kQkey},
        .uc = {.optional = kCurState | kAccess},
    },
    QpTransitionRule{.cur = IBV_QPS_SQE, .next = IBV_QPS_ERR},

    QpTransitionRule{.cur = IBV_QPS_ERR, .next = IBV_QPS_RESET},
    QpTransitionRule{.cur = IBV_QPS_ERR, .next = IBV_QPS_ERR},
};

// §2.3 has 22 valid cells.
static_assert(kRules.size() == 22);

// mlx5_ib's DC rules. DCI: IBV_QP_STATE alone into RESET from anywhere
// and into ERR from anywhere but RESET; an address vector at INIT->RTR
// (UCX's dc_mlx5 passes one: the DCI's default path, each WR names its
// own); DCT: two cells.
constexpr QpTransitionMasks kStateOnly{};
constexpr std::array kDcRules = {
    DcTransitionRule{.cur = IBV_QPS_RESET, .next = IBV_QPS_RESET, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_RESET,
                     .next = IBV_QPS_INIT,
                     .dci = QpTransitionMasks{.required = kPkey | kPort},
                     .dct = QpTransitionMasks{.required = kAccess | kPkey | kPort}},
    DcTransitionRule{.cur = IBV_QPS_INIT, .next = IBV_QPS_RESET, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_INIT,
                     .next = IBV_QPS_INIT,
                     .dci = QpTransitionMasks{.optional = kPkey | kPort}},
    DcTransitionRule{.cur = IBV_QPS_INIT,
                     .next = IBV_QPS_RTR,
                     .dci = QpTransitionMasks{.required = kPathMtu, .optional = kPkey | kAv},
                     .dct = QpTransitionMasks{.required = kMinRnrTimer | kAv | kPathMtu}},
    DcTransitionRule{.cur = IBV_QPS_INIT, .next = IBV_QPS_ERR, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_RTR, .next = IBV_QPS_RESET, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_RTR,
                     .next = IBV_QPS_RTS,
                     .dci = QpTransitionMasks{.required = kTimeout | kRetryCnt | kRnrRetry |
                                                          kMaxRdAtomic | kSqPsn,
                                              .optional = kMinRnrTimer}},
    DcTransitionRule{.cur = IBV_QPS_RTR, .next = IBV_QPS_ERR, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_RTS, .next = IBV_QPS_RESET, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_RTS,
                     .next = IBV_QPS_RTS,
                     .dci = QpTransitionMasks{.optional = kMinRnrTimer}},
    DcTransitionRule{.cur = IBV_QPS_RTS, .next = IBV_QPS_ERR, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_SQD, .next = IBV_QPS_RESET, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_SQD, .next = IBV_QPS_ERR, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_SQE, .next = IBV_QPS_RESET, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_SQE, .next = IBV_QPS_ERR, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_ERR, .next = IBV_QPS_RESET, .dci = kStateOnly},
    DcTransitionRule{.cur = IBV_QPS_ERR, .next = IBV_QPS_ERR, .dci = kStateOnly},
};

// Indexed by QpTableColumn.
constexpr std::array kColumnMembers = {
    &QpTransitionRule::ud,      &QpTransitionRule::uc,      &QpTransitionRule::rc,
    &QpTransitionRule::xrc_ini, &QpTransitionRule::xrc_tgt, &QpTransitionRule::raw_packet,
};

}  // namespace

std::optional<QpTableColumn> QpTableColumnFor(ibv_qp_type type) {
  if (type == kLegacyQptXrc) return QpTableColumn::kXrcIni;
  switch (type) {
    case IBV_QPT_UD:
      return QpTableColumn::kUd;
    case IBV_QPT_UC:
      return QpTableColumn::kUc;
    case IBV_QPT_RC:
      return QpTableColumn::kRc;
    case IBV_QPT_XRC_SEND:
      return QpTableColumn::kXrcIni;
    case IBV_QPT_XRC_RECV:
      return QpTableColumn::kXrcTgt;
    case IBV_QPT_RAW_PACKET:
      return QpTableColumn::kRawPacket;
    case IBV_QPT_DRIVER:
      break;
  }
  if (type == kQptDcIni) return QpTableColumn::kDci;
  if (type == kQptDcTgt) return QpTableColumn::kDct;
  return std::nullopt;
}

std::span<const QpTransitionRule> QpTransitionRules() {
  return kRules;
}

const QpTransitionRule* FindQpTransition(ibv_qp_state cur, ibv_qp_state next) {
  for (const QpTransitionRule& rule : kRules) {
    if (rule.cur == cur && rule.next == next) return &rule;
  }
  return nullptr;
}

const QpTransitionMasks& MasksFor(const QpTransitionRule& rule, QpTableColumn column) {
  return rule.*kColumnMembers[static_cast<size_t>(column)];
}

std::span<const DcTransitionRule> DcTransitionRules() {
  return kDcRules;
}

const QpTransitionMasks* FindTransitionMasks(QpTableColumn column, ibv_qp_state cur,
                                             ibv_qp_state next) {
  if (column == QpTableColumn::kDci || column == QpTableColumn::kDct) {
    for (const DcTransitionRule& rule : kDcRules) {
      if (rule.cur != cur || rule.next != next) continue;
      const std::optional<QpTransitionMasks>& masks =
          column == QpTableColumn::kDci ? rule.dci : rule.dct;
      return masks ? &*masks : nullptr;
    }
    return nullptr;
  }
  const QpTransitionRule* rule = FindQpTransition(cur, next);
  return rule ? &MasksFor(*rule, column) : nullptr;
}

}  // namespace softverbs::verbs
