// Posting work requests. The shared-memory data path is not built yet:
// every post fails with EOPNOTSUPP and points *bad_wr at the first WR, so an
// application sees an honest refusal rather than a silent drop.
#include <errno.h>

#include "abi/ibverbs/ops.h"
#include "common/log.h"

namespace softverbs::provider {

int PostSendOp(ibv_qp*, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  if (bad_wr) *bad_wr = wr;
  Log("ibv_post_send: the data path is not implemented yet");
  return EOPNOTSUPP;
}

int PostRecvOp(ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (bad_wr) *bad_wr = wr;
  Log("ibv_post_recv: the data path is not implemented yet");
  return EOPNOTSUPP;
}

int PostSrqRecvOp(ibv_srq*, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (bad_wr) *bad_wr = wr;
  Log("ibv_post_srq_recv: the data path is not implemented yet");
  return EOPNOTSUPP;
}

}  // namespace softverbs::provider
