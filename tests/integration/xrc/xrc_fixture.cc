#include "xrc_fixture.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

namespace softverbs::it {

namespace {

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ToInit(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int ToRtr(ibv_qp* qp, uint32_t dest_qpn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest_qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;  // 0.01 ms
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 1;
  ibv_query_gid(qp->context, 1, 0, &a.ah_attr.grh.dgid);
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                           IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

}  // namespace

Buffer RegisterBuffer(ibv_pd* pd, size_t size) {
  Buffer b;
  // aligned_alloc wants a size that is a multiple of the alignment.
  b.data = static_cast<char*>(aligned_alloc(4096, (size + 4095) / 4096 * 4096));
  memset(b.data, 0, size);
  b.mr = ibv_reg_mr(pd, b.data, size,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC);
  return b;
}

ibv_xrcd* OpenXrcd(ibv_context* ctx, const std::string& path, int oflags) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return nullptr;
  ibv_xrcd_init_attr a{};
  a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  a.fd = fd;
  a.oflags = oflags;
  ibv_xrcd* x = ibv_open_xrcd(ctx, &a);
  close(fd);
  return x;
}

ibv_srq* CreateXrcSrq(ibv_context* ctx, ibv_pd* pd, ibv_xrcd* xrcd, ibv_cq* cq) {
  ibv_srq_init_attr_ex a{};
  a.attr = {64, 1, 0};
  a.comp_mask =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  a.srq_type = IBV_SRQT_XRC;
  a.pd = pd;
  a.xrcd = xrcd;
  a.cq = cq;
  return ibv_create_srq_ex(ctx, &a);
}

uint32_t SrqNumber(ibv_srq* srq) {
  uint32_t n = 0;
  return srq && ibv_get_srq_num(srq, &n) == 0 ? n : 0;
}

ibv_qp* CreateRecvQp(ibv_context* ctx, ibv_xrcd* xrcd) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_RECV;
  a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  a.xrcd = xrcd;
  return ibv_create_qp_ex(ctx, &a);
}

ibv_qp* CreateSendQp(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq, bool with_wr_api) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_SEND;
  a.send_cq = cq;
  a.cap.max_send_wr = 64;
  a.cap.max_send_sge = 1;
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  if (with_wr_api) {
    a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
  }
  return ibv_create_qp_ex(ctx, &a);
}

int ReceiveToRtr(ibv_qp* qp, uint32_t dest_qpn) {
  if (int err = ToInit(qp)) return err;
  return ToRtr(qp, dest_qpn);
}

int SendToRts(ibv_qp* qp, uint32_t dest_qpn, uint8_t timeout, uint8_t retry_cnt) {
  if (int err = ToInit(qp)) return err;
  if (int err = ToRtr(qp, dest_qpn)) return err;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = timeout;
  a.retry_cnt = retry_cnt;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int PostSrqReceive(ibv_srq* srq, const Buffer& b, size_t offset, uint32_t length, uint64_t wr_id) {
  ibv_sge sge{reinterpret_cast<uint64_t>(b.data + offset), length, b.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_srq_recv(srq, &wr, &bad);
}

int PostXrcSend(ibv_qp* qp, const Buffer& b, size_t offset, uint32_t length, uint32_t srqn,
                uint64_t wr_id) {
  ibv_sge sge{reinterpret_cast<uint64_t>(b.data + offset), length, b.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.qp_type.xrc.remote_srqn = srqn;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

bool PollOne(ibv_cq* cq, ibv_wc* wc, int timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  do {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n == 1) return true;
    if (n < 0) return false;
    usleep(100);
  } while (NowMs() < deadline);
  return false;
}

bool StaysEmpty(ibv_cq* cq, int ms) {
  ibv_wc wc;
  return !PollOne(cq, &wc, ms);
}

ibv_qp_state QueryState(ibv_qp* qp) {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) != 0) return IBV_QPS_UNKNOWN;
  return attr.qp_state;
}

bool NextAsyncEvent(ibv_context* ctx, ibv_async_event* ev, int timeout_ms) {
  pollfd p{ctx->async_fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return false;
  if (ibv_get_async_event(ctx, ev) != 0) return false;
  ibv_ack_async_event(ev);
  return true;
}

DomainFile::DomainFile() {
  char path[] = "/tmp/softverbs-xrc-traffic-XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  path_ = path;
}

DomainFile::~DomainFile() {
  unlink(path_.c_str());
}

}  // namespace softverbs::it
