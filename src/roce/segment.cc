#include "roce/segment.h"

namespace softverbs::roce {
namespace dp = softverbs::datapath;
using dp::IbtaOperation;
using dp::IbtaSegment;

namespace {

// The kind of message an operation belongs to (which FIRST/MIDDLE/LAST go
// together).
enum class Kind { kSend, kWrite, kReadResponse, kSingle };

Kind KindOf(IbtaOperation op) {
  const auto v = static_cast<uint8_t>(op);
  if (v <= 0x05 || op == IbtaOperation::kSendLastWithInvalidate ||
      op == IbtaOperation::kSendOnlyWithInvalidate)
    return Kind::kSend;
  if (v <= 0x0b) return Kind::kWrite;
  if (v >= 0x0d && v <= 0x10) return Kind::kReadResponse;
  return Kind::kSingle;
}

IbtaOperation LastOf(const dp::WrOpcodeInfo& wr) {
  if (wr.action == dp::WrAction::kWrite) {
    return wr.immediate ? IbtaOperation::kWriteLastWithImm : IbtaOperation::kWriteLast;
  }
  if (wr.immediate) return IbtaOperation::kSendLastWithImm;
  if (wr.invalidate) return IbtaOperation::kSendLastWithInvalidate;
  return IbtaOperation::kSendLast;
}

}  // namespace

IbtaOperation RequestOperation(const dp::WrOpcodeInfo& wr, uint32_t i, uint32_t n) {
  if (wr.wire_only == IbtaOperation::kNone) return IbtaOperation::kNone;
  if (n <= 1 || wr.wire_first == IbtaOperation::kNone) return wr.wire_only;
  if (i == 0) return wr.wire_first;
  if (i + 1 < n) {
    return wr.action == dp::WrAction::kWrite ? IbtaOperation::kWriteMiddle
                                             : IbtaOperation::kSendMiddle;
  }
  return LastOf(wr);
}

IbtaOperation ReadResponseOperation(uint32_t i, uint32_t n) {
  if (n <= 1) return IbtaOperation::kReadResponseOnly;
  if (i == 0) return IbtaOperation::kReadResponseFirst;
  return i + 1 < n ? IbtaOperation::kReadResponseMiddle : IbtaOperation::kReadResponseLast;
}

bool MayFollow(IbtaOperation prev, IbtaOperation next) {
  const dp::IbtaOperationInfo& p = dp::IbtaOperationRow(prev);
  const dp::IbtaOperationInfo& q = dp::IbtaOperationRow(next);
  if (p.transports == 0 || q.transports == 0) return false;  // no such operation (or RD only)
  const bool open = p.segment == IbtaSegment::kFirst || p.segment == IbtaSegment::kMiddle;
  const bool continues = q.segment == IbtaSegment::kMiddle || q.segment == IbtaSegment::kLast;
  if (open) return continues && KindOf(prev) == KindOf(next);
  return !continues;
}

}  // namespace softverbs::roce
