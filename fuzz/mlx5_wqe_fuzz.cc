// libFuzzer target: the mlx5 WQE parsers (datapath/mlx5_wqe.h) on arbitrary
// queue contents. The input fills a send ring (its first byte picks the
// ring's size, 1..16 basic blocks) and every basic block is parsed as the
// start of a WQE, then the same bytes as receive WQEs of every stride; a
// parsed WQE's completion is built as a CQE. Any out-of-bounds access,
// undefined behaviour or crash is a finding (ASan/UBSan abort).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "datapath/mlx5_wqe.h"

using namespace softverbs::datapath;
using namespace softverbs::datapath::mlx5;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint32_t blocks = 1u << (data[0] % 5);  // 1, 2, 4, 8, 16
  std::vector<uint8_t> ring(blocks * kSendWqeBb, 0);
  memcpy(ring.data(), data + 1, std::min(size - 1, ring.size()));
  const uint32_t qpn = size > 4 ? (uint32_t{data[1]} << 8 | data[2]) : 0;
  for (uint32_t bb = 0; bb < blocks; ++bb) {
    ParsedSendWqe wqe;
    const WqeError error = ParseSendWqe(ring.data(), blocks, bb, qpn, &wqe);
    Completion c{};
    c.wr_id = wqe.wr.wr_id;
    c.opcode = IBV_WC_SEND;
    c.status = error == WqeError::kNone ? IBV_WC_SUCCESS : IBV_WC_LOC_QP_OP_ERR;
    alignas(64) uint8_t cqe[kCqeBytes];
    cqe[kCqeBytes - 1] = BuildCqe(c, qpn, cqe);
    (void)WqeErrorName(error);
  }
  for (uint32_t stride = 16; stride <= ring.size(); stride <<= 1) {
    RecvSge sge[kMaxSendSge];
    uint32_t num = 0;
    (void)ParseRecvWqe(ring.data(), stride, sge, kMaxSendSge, &num);
    if (num > kMaxSendSge) __builtin_trap();
  }
  return 0;
}
