// Exhaustive check of the QP state table against an oracle transcribed
// separately from the spec (shared/spec/xrc-and-qp-states.md): the §2.3 grid of
// valid pairs and the §2.4 "req hex" / "opt hex" columns, per QP type. Every
// QP type x current state x next state is its own named case.
#include "verbs/qp_state_table.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "modify_request_fixture.h"
#include "verbs/qp_modify_check.h"

namespace softverbs::verbs {
namespace {

using fixtures::kDeviceLimits;
using fixtures::kRocePort;
using fixtures::ValidAttr;

constexpr int kNumStates = 7;  // RESET..ERR
constexpr const char* kStateNames[kNumStates] = {"RESET", "INIT", "RTR", "RTS",
                                                 "SQD",   "SQE",  "ERR"};

// §2.3, row = cur, column = next in RESET INIT RTR RTS SQD SQE ERR order.
constexpr const char* kValidPairs[kNumStates] = {
    "YY.....",  // RESET
    "YYY...Y",  // INIT
    "Y..Y..Y",  // RTR
    "Y..YY.Y",  // RTS
    "Y..YY.Y",  // SQD
    "Y..Y..Y",  // SQE
    "Y.....Y",  // ERR
};

struct HexCell {
  uint32_t req;
  uint32_t opt;
};

// §2.4 hex columns. Valid cells not listed here accept IBV_QP_STATE only.
struct SpecRow {
  ibv_qp_state cur;
  ibv_qp_state next;
  HexCell by_type[6];  // UD, UC, RC, XRC_INI, XRC_TGT, RAW_PACKET
};
constexpr SpecRow kSpecMasks[] = {
    {IBV_QPS_RESET,
     IBV_QPS_INIT,
     {{0x70, 0x0}, {0x38, 0x0}, {0x38, 0x0}, {0x38, 0x0}, {0x38, 0x0}, {0x20, 0x0}}},
    {IBV_QPS_INIT,
     IBV_QPS_INIT,
     {{0x0, 0x70}, {0x0, 0x38}, {0x0, 0x38}, {0x0, 0x38}, {0x0, 0x38}, {0x0, 0x0}}},
    {IBV_QPS_INIT,
     IBV_QPS_RTR,
     {{0x0, 0x50},
      {0x101180, 0x4018},
      {0x129180, 0x4018},
      {0x101180, 0x4018},
      {0x129180, 0x4018},
      {0x0, 0x0}}},
    {IBV_QPS_RTR,
     IBV_QPS_RTS,
     {{0x10000, 0x42},
      {0x10000, 0x4400a},
      {0x12e00, 0x4c00a},
      {0x12e00, 0x4400a},
      {0x10200, 0x4c00a},
      {0x0, 0x2000000}}},
    {IBV_QPS_RTS,
     IBV_QPS_RTS,
     {{0x0, 0x42},
      {0x0, 0x4400a},
      {0x0, 0x4c00a},
      {0x0, 0x4400a},
      {0x0, 0x4c00a},
      {0x0, 0x2000000}}},
    {IBV_QPS_RTS,
     IBV_QPS_SQD,
     {{0x0, 0x4}, {0x0, 0x4}, {0x0, 0x4}, {0x0, 0x4}, {0x0, 0x4}, {0x0, 0x0}}},
    {IBV_QPS_SQD,
     IBV_QPS_RTS,
     {{0x0, 0x42}, {0x0, 0x4400a}, {0x0, 0x4c00a}, {0x0, 0x4400a}, {0x0, 0x4c00a}, {0x0, 0x0}}},
    {IBV_QPS_SQD,
     IBV_QPS_SQD,
     {{0x0, 0x50}, {0x0, 0x44098}, {0x0, 0x6eeb8}, {0x0, 0x46eb8}, {0x0, 0x6c2b8}, {0x0, 0x0}}},
    {IBV_QPS_SQE,
     IBV_QPS_RTS,
     {{0x0, 0x42}, {0x0, 0xa}, {0x0, 0x0}, {0x0, 0x0}, {0x0, 0x0}, {0x0, 0x0}}},
};

// Bit names of ibv_qp_attr_mask bits 0..20, for expected explanations.
constexpr const char* kBitNames[21] = {
    "IBV_QP_STATE",
    "IBV_QP_CUR_STATE",
    "IBV_QP_EN_SQD_ASYNC_NOTIFY",
    "IBV_QP_ACCESS_FLAGS",
    "IBV_QP_PKEY_INDEX",
    "IBV_QP_PORT",
    "IBV_QP_QKEY",
    "IBV_QP_AV",
    "IBV_QP_PATH_MTU",
    "IBV_QP_TIMEOUT",
    "IBV_QP_RETRY_CNT",
    "IBV_QP_RNR_RETRY",
    "IBV_QP_RQ_PSN",
    "IBV_QP_MAX_QP_RD_ATOMIC",
    "IBV_QP_ALT_PATH",
    "IBV_QP_MIN_RNR_TIMER",
    "IBV_QP_SQ_PSN",
    "IBV_QP_MAX_DEST_RD_ATOMIC",
    "IBV_QP_PATH_MIG_STATE",
    "IBV_QP_CAP",
    "IBV_QP_DEST_QPN",
};

constexpr uint32_t kStateBit = 0x1;
constexpr uint32_t kCurStateBit = 0x2;
constexpr uint32_t kLastStandardBit = 1u << 20;  // IBV_QP_DEST_QPN
constexpr uint32_t kStandardBits = 0x1fffff;     // bits 0..20

struct TypeUnderTest {
  ibv_qp_type type;
  const char* case_name;  // in test names
  const char* why_name;   // in explanations
  int spec_column;        // index into SpecRow::by_type
  uint32_t stripped;      // §1.3 / §2.6: bits uverbs drops for this type
};

constexpr TypeUnderTest kTypes[] = {
    {IBV_QPT_UD, "UD", "UD", 0, 0x0},
    {IBV_QPT_UC, "UC", "UC", 1, 0x0},
    {IBV_QPT_RC, "RC", "RC", 2, 0x0},
    {IBV_QPT_XRC_SEND, "XRC_SEND", "XRC_SEND", 3, 0x28000},
    {IBV_QPT_XRC_RECV, "XRC_RECV", "XRC_RECV", 4, 0x2C00},
    {static_cast<ibv_qp_type>(5), "XRC_legacy", "XRC", 3, 0x28000},
    {IBV_QPT_RAW_PACKET, "RAW_PACKET", "RAW_PACKET", 5, 0x0},
};

std::string BitName(uint32_t bit) {
  for (int i = 0; i <= 20; ++i) {
    if (bit == (1u << i)) return kBitNames[i];
  }
  return "?";
}

std::vector<uint32_t> BitsOf(uint32_t mask) {
  std::vector<uint32_t> bits;
  for (uint32_t bit = 1; bit != 0; bit <<= 1) {
    if (mask & bit) bits.push_back(bit);
  }
  return bits;
}

bool SpecValid(int cur, int next) {
  return kValidPairs[cur][next] == 'Y';
}

HexCell SpecCell(int cur, int next, int spec_column) {
  for (const SpecRow& row : kSpecMasks) {
    if (row.cur == cur && row.next == next) return row.by_type[spec_column];
  }
  return {0, 0};
}

bool CurStateAssertable(int state) {
  return state == IBV_QPS_RTR || state == IBV_QPS_RTS || state == IBV_QPS_SQD ||
         state == IBV_QPS_SQE;
}

ModifyVerdict RunCell(const TypeUnderTest& type, int cur, int next, uint32_t mask) {
  ibv_qp_attr attr = ValidAttr();
  attr.qp_state = static_cast<ibv_qp_state>(next);
  attr.cur_qp_state = static_cast<ibv_qp_state>(cur);
  return CheckModifyQp(type.type, static_cast<ibv_qp_state>(cur), attr, mask, kDeviceLimits,
                       kRocePort);
}

// The oracle's own transcription must be consistent with itself: a listed
// cell is a valid one.
TEST(QpStateTableOracle, ListedCellsAreValid) {
  for (const SpecRow& row : kSpecMasks) EXPECT_TRUE(SpecValid(row.cur, row.next));
}

// The implementation's rows, compared field by field with the spec's hex.
TEST(QpStateTable, RowsAreExactlyTheSpecCells) {
  int valid_cells = 0;
  for (int cur = 0; cur < kNumStates; ++cur) {
    for (int next = 0; next < kNumStates; ++next) {
      SCOPED_TRACE(std::string(kStateNames[cur]) + "->" + kStateNames[next]);
      const QpTransitionRule* rule =
          FindQpTransition(static_cast<ibv_qp_state>(cur), static_cast<ibv_qp_state>(next));
      ASSERT_EQ(rule != nullptr, SpecValid(cur, next));
      if (rule == nullptr) continue;
      ++valid_cells;
      for (const TypeUnderTest& type : kTypes) {
        SCOPED_TRACE(type.case_name);
        const HexCell spec = SpecCell(cur, next, type.spec_column);
        const QpTransitionMasks& masks = MasksFor(*rule, *QpTableColumnFor(type.type));
        EXPECT_EQ(masks.required, spec.req);
        EXPECT_EQ(masks.optional, spec.opt);
      }
    }
  }
  EXPECT_EQ(valid_cells, 22);
  EXPECT_EQ(QpTransitionRules().size(), 22u);
}

TEST(QpStateTable, TypesWithoutRulesHaveNoColumn) {
  EXPECT_FALSE(QpTableColumnFor(IBV_QPT_DRIVER).has_value());
  EXPECT_FALSE(QpTableColumnFor(static_cast<ibv_qp_type>(0)).has_value());
  EXPECT_FALSE(QpTableColumnFor(static_cast<ibv_qp_type>(6)).has_value());
}

struct Cell {
  TypeUnderTest type;
  int cur;
  int next;
};

void PrintTo(const Cell& cell, std::ostream* os) {
  *os << cell.type.case_name << " " << kStateNames[cell.cur] << "->" << kStateNames[cell.next];
}

std::vector<Cell> AllCells() {
  std::vector<Cell> cells;
  for (const TypeUnderTest& type : kTypes) {
    for (int cur = 0; cur < kNumStates; ++cur) {
      for (int next = 0; next < kNumStates; ++next) cells.push_back({type, cur, next});
    }
  }
  return cells;
}

std::string CellName(const ::testing::TestParamInfo<Cell>& info) {
  return std::string(info.param.type.case_name) + "_" + kStateNames[info.param.cur] + "_to_" +
         kStateNames[info.param.next];
}

class CellTest : public ::testing::TestWithParam<Cell> {
 protected:
  const TypeUnderTest& type() const { return GetParam().type; }
  int cur() const { return GetParam().cur; }
  int next() const { return GetParam().next; }
  bool valid() const { return SpecValid(cur(), next()); }
  HexCell spec() const { return SpecCell(cur(), next(), type().spec_column); }
  ModifyVerdict Run(uint32_t mask) const { return RunCell(type(), cur(), next(), mask); }
  std::string Transition() const {
    return std::string(kStateNames[cur()]) + "->" + kStateNames[next()] + " on " + type().why_name;
  }
};

TEST_P(CellTest, ExactRequiredMask) {
  const uint32_t mask = spec().req | kStateBit;
  const ModifyVerdict verdict = Run(mask);
  if (valid()) {
    EXPECT_EQ(verdict.err, 0) << verdict.why;
    EXPECT_EQ(verdict.cur, cur());
    EXPECT_EQ(verdict.next, next());
    EXPECT_EQ(verdict.effective_mask, mask);
    EXPECT_EQ(verdict.why, "");
  } else {
    EXPECT_EQ(verdict.err, EINVAL);
    EXPECT_EQ(verdict.why, std::string(kStateNames[cur()]) + "->" + kStateNames[next()] +
                               " is not a valid QP state transition");
  }
}

TEST_P(CellTest, EachMissingRequiredBitFails) {
  for (uint32_t bit : BitsOf(spec().req)) {
    SCOPED_TRACE(BitName(bit));
    const ModifyVerdict verdict = Run((spec().req & ~bit) | kStateBit);
    EXPECT_EQ(verdict.err, EINVAL);
    EXPECT_EQ(verdict.why, Transition() + " requires " + BitName(bit));
  }
}

TEST_P(CellTest, EachBitOutsideTheCellFailsUnlessStripped) {
  const uint32_t allowed = spec().req | spec().opt | kStateBit;
  for (uint32_t bit = 1u << 1; bit <= kLastStandardBit; bit <<= 1) {
    if (allowed & bit) continue;
    SCOPED_TRACE(BitName(bit));
    const ModifyVerdict verdict = Run(spec().req | kStateBit | bit);
    if (valid() && (type().stripped & bit)) {
      EXPECT_EQ(verdict.err, 0) << verdict.why;
      EXPECT_EQ(verdict.effective_mask, spec().req | kStateBit);
    } else {
      EXPECT_EQ(verdict.err, EINVAL);
      if (valid() && bit != kCurStateBit) {
        EXPECT_EQ(verdict.why, Transition() + " does not accept " + BitName(bit));
      }
    }
  }
}

TEST_P(CellTest, EachOptionalBitAloneSucceeds) {
  for (uint32_t bit : BitsOf(spec().opt)) {
    const uint32_t mask = spec().req | kStateBit | bit;
    const ModifyVerdict verdict = Run(mask);
    if (bit & ~kStandardBits) {
      // RAW_PACKET's IBV_QP_RATE_LIMIT: ibv_modify_qp's path refuses it.
      EXPECT_EQ(verdict.err, EOPNOTSUPP);
      continue;
    }
    SCOPED_TRACE(BitName(bit));
    EXPECT_EQ(verdict.err, 0) << verdict.why;
    EXPECT_EQ(verdict.effective_mask, mask);
  }
}

TEST_P(CellTest, AllOptionalBitsTogetherSucceed) {
  const uint32_t mask = spec().req | (spec().opt & kStandardBits) | kStateBit;
  const ModifyVerdict verdict = Run(mask);
  EXPECT_EQ(verdict.err, valid() ? 0 : EINVAL) << verdict.why;
  EXPECT_EQ(verdict.effective_mask, mask);
}

TEST_P(CellTest, CurStateAssertion) {
  const ModifyVerdict verdict = Run(spec().req | kStateBit | kCurStateBit);
  if (!CurStateAssertable(cur())) {
    EXPECT_EQ(verdict.err, EINVAL);
    EXPECT_EQ(verdict.why, std::string("IBV_QP_CUR_STATE is only allowed from RTR/RTS/SQD/SQE, "
                                       "not ") +
                               kStateNames[cur()]);
  } else if (!valid()) {
    EXPECT_EQ(verdict.err, EINVAL);
  } else if (spec().opt & kCurStateBit) {
    EXPECT_EQ(verdict.err, 0) << verdict.why;
  } else {
    EXPECT_EQ(verdict.err, EINVAL);
    EXPECT_EQ(verdict.why, Transition() + " does not accept IBV_QP_CUR_STATE");
  }
}

TEST_P(CellTest, BitsAboveDestQpnAreNotSupported) {
  for (uint32_t bit = kLastStandardBit << 1; bit != 0; bit <<= 1) {
    const ModifyVerdict verdict = Run(spec().req | kStateBit | bit);
    EXPECT_EQ(verdict.err, EOPNOTSUPP) << "bit 0x" << std::hex << bit;
  }
}

INSTANTIATE_TEST_SUITE_P(QpStateTable, CellTest, ::testing::ValuesIn(AllCells()), CellName);

// A modify without IBV_QP_STATE is the cur -> cur transition.
struct SelfCase {
  TypeUnderTest type;
  int state;
};

void PrintTo(const SelfCase& self_case, std::ostream* os) {
  *os << self_case.type.case_name << " " << kStateNames[self_case.state];
}

std::vector<SelfCase> AllSelfCases() {
  std::vector<SelfCase> cases;
  for (const TypeUnderTest& type : kTypes) {
    for (int state = 0; state < kNumStates; ++state) cases.push_back({type, state});
  }
  return cases;
}

std::string SelfCaseName(const ::testing::TestParamInfo<SelfCase>& info) {
  return std::string(info.param.type.case_name) + "_" + kStateNames[info.param.state];
}

class WithoutStateBitTest : public ::testing::TestWithParam<SelfCase> {};

TEST_P(WithoutStateBitTest, EmptyMaskStaysInState) {
  const int state = GetParam().state;
  const ModifyVerdict verdict = RunCell(GetParam().type, state, state, 0);
  if (SpecValid(state, state)) {
    EXPECT_EQ(verdict.err, 0) << verdict.why;
    EXPECT_EQ(verdict.next, state);
  } else {
    EXPECT_EQ(verdict.err, EINVAL);
    EXPECT_EQ(verdict.why, std::string(kStateNames[state]) + "->" + kStateNames[state] +
                               " (no IBV_QP_STATE: the QP stays in " + kStateNames[state] +
                               ") is not a valid QP state transition");
  }
}

TEST_P(WithoutStateBitTest, EachOptionalBitWithoutStateSucceeds) {
  const int state = GetParam().state;
  const HexCell cell = SpecCell(state, state, GetParam().type.spec_column);
  for (uint32_t bit : BitsOf(cell.opt & kStandardBits)) {
    SCOPED_TRACE(BitName(bit));
    const ModifyVerdict verdict = RunCell(GetParam().type, state, state, bit);
    EXPECT_EQ(verdict.err, 0) << verdict.why;
    EXPECT_EQ(verdict.next, state);
  }
}

INSTANTIATE_TEST_SUITE_P(QpStateTable, WithoutStateBitTest, ::testing::ValuesIn(AllSelfCases()),
                         SelfCaseName);

}  // namespace
}  // namespace softverbs::verbs
