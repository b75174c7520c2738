// rsockets' endpoint: the QP, its CQ and completion channel, the three
// registered areas (send buffer, receive buffer, target area) and the
// receives of a connection; the RsConnData that names them to the peer and
// what the peer's says; and the socket's end (FreeSocket).
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>

#include "abi/rdmacm/rsocket_internal.h"

namespace softverbs::rdmacm::rs {
namespace {

constexpr bool kBigEndianHost = __BYTE_ORDER == __BIG_ENDIAN;

// Page-aligned, zeroed memory for a registered area (nothing else of the
// process shares its pages).
void* AllocArea(size_t len) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, len)) return nullptr;
  memset(p, 0, len);
  return p;
}

}  // namespace

int SetNonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void FormatConnData(const Rsocket& rs, RsConnData* c) {
  memset(c, 0, sizeof(*c));
  c->version = kConnVersion;
  c->flags = kConnFlagIomap | (kBigEndianHost ? kConnFlagNet : 0);
  c->credits_be = htobe16(rs.rq_size);
  c->target_iomap_size = EncodeIomapSize(rs.target_iomap_size);
  c->target_sgl.addr = htobe64(reinterpret_cast<uintptr_t>(rs.target_sgl));
  c->target_sgl.key = htobe32(rs.target_mr->rkey);
  c->target_sgl.length = htobe32(kTargetSglEntries);
  c->data_buf.addr = htobe64(reinterpret_cast<uintptr_t>(rs.rbuf));
  c->data_buf.key = htobe32(rs.rmr->rkey);
  c->data_buf.length = htobe32(rs.rbuf_size / 2);
}

// The peer's RsConnData: where our SGL and IOMAP_SGL messages go, its first
// receive buffer half, its credits.
void SaveConnData(Rsocket& rs, const RsConnData& c) {
  rs.remote_sgl.addr = be64toh(c.target_sgl.addr);
  rs.remote_sgl.key = be32toh(c.target_sgl.key);
  rs.remote_sgl.length = be32toh(c.target_sgl.length);
  rs.remote_sge = 1;  // entry 0 is the data_buf it named
  rs.swap_sgl = ((c.flags & kConnFlagNet) != 0) != kBigEndianHost;
  if (c.flags & kConnFlagIomap) {
    rs.remote_iomap.addr = rs.remote_sgl.addr + sizeof(RsSge) * rs.remote_sgl.length;
    rs.remote_iomap.length = DecodeIomapSize(c.target_iomap_size);
    rs.remote_iomap.key = rs.remote_sgl.key;
  }
  rs.target_sgl[0].addr = be64toh(c.data_buf.addr);
  rs.target_sgl[0].key = be32toh(c.data_buf.key);
  rs.target_sgl[0].length = be32toh(c.data_buf.length);
  rs.sseq_comp = be16toh(c.credits_be);
  rs.iomap_used.assign(rs.remote_iomap.length, false);
}

void MarkConnected(Rsocket& rs) {
  rs.phase = Phase::kConnected;
  rs.readable = rs.writable = true;
}

// The QP, its CQ and completion channel (both ends of the QP complete on
// one CQ), the registered areas, and rq_size posted receives.
int CreateEndpoint(Rsocket& rs) {
  rdma_cm_id* id = rs.id;
  ibv_device_attr dev{};
  if (ibv_query_device(id->verbs, &dev)) return -1;
  const int max_size = std::min<int>(dev.max_qp_wr, kMaxQueueSize);
  rs.sq_size = static_cast<uint16_t>(std::clamp<int>(rs.sq_size, kMinQueueSize, max_size));
  rs.rq_size = static_cast<uint16_t>(std::clamp<int>(rs.rq_size, kMinQueueSize, max_size));

  rs.comp = ibv_create_comp_channel(id->verbs);
  if (!rs.comp) return -1;
  rs.cq = ibv_create_cq(id->verbs, rs.sq_size + rs.rq_size, &rs, rs.comp, 0);
  if (!rs.cq || SetNonblocking(rs.comp->fd)) {
    int err = errno;
    if (rs.cq) ibv_destroy_cq(rs.cq);
    ibv_destroy_comp_channel(rs.comp);
    rs.cq = nullptr;
    rs.comp = nullptr;
    errno = err;
    return -1;
  }
  // The id owns them from here: rdma_destroy_qp destroys them (also when
  // rdma_create_qp fails).
  id->recv_cq = id->send_cq = rs.cq;
  id->recv_cq_channel = id->send_cq_channel = rs.comp;

  ibv_qp_init_attr qa{};
  qa.qp_context = &rs;
  qa.send_cq = qa.recv_cq = rs.cq;
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 1;
  qa.cap.max_send_wr = rs.sq_size;
  qa.cap.max_recv_wr = rs.rq_size;
  qa.cap.max_send_sge = 2;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = rs.sq_inline;
  if (rdma_create_qp(id, nullptr, &qa)) {
    rs.cq = nullptr;
    rs.comp = nullptr;
    return -1;
  }
  rs.sq_inline = static_cast<uint16_t>(qa.cap.max_inline_data);

  // Send buffer, then the control slots (SGL messages' RsSge when they do
  // not go inline).
  const size_t sbuf_total = rs.sbuf_size + kControlSlots * sizeof(RsSge);
  rs.sbuf = static_cast<uint8_t*>(AllocArea(sbuf_total));
  if (!rs.sbuf) return errno = ENOMEM, -1;
  rs.smr = ibv_reg_mr(id->pd, rs.sbuf, sbuf_total, IBV_ACCESS_LOCAL_WRITE);
  if (!rs.smr) return -1;

  const size_t target_len =
      sizeof(RsSge) * kTargetSglEntries + sizeof(RsIomap) * rs.target_iomap_size;
  rs.target_area = AllocArea(target_len);
  if (!rs.target_area) return errno = ENOMEM, -1;
  rs.target_mr = ibv_reg_mr(id->pd, rs.target_area, target_len,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!rs.target_mr) return -1;
  rs.target_sgl = static_cast<volatile RsSge*>(rs.target_area);
  if (rs.target_iomap_size) {
    rs.target_iomap = reinterpret_cast<volatile RsIomap*>(static_cast<uint8_t*>(rs.target_area) +
                                                          sizeof(RsSge) * kTargetSglEntries);
  }

  rs.rbuf = static_cast<uint8_t*>(AllocArea(rs.rbuf_size));
  if (!rs.rbuf) return errno = ENOMEM, -1;
  rs.rmr =
      ibv_reg_mr(id->pd, rs.rbuf, rs.rbuf_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!rs.rmr) return -1;

  rs.sbuf_head = 0;
  rs.sbuf_avail = rs.sbuf_size;
  rs.ctrl_seqno = 0;
  rs.ctrl_max_seqno = kControlSlots;
  rs.sqe_avail = rs.sq_size - kControlSlots;
  rs.rbuf_free_offset = rs.rbuf_size / 2;  // the first half goes in the conn data
  rs.rbuf_avail = rs.rbuf_size / 2;
  rs.rseq_comp = rs.rq_size / 2;
  rs.rmsg.assign(rs.rq_size + 1u, 0);

  for (int i = 0; i < rs.rq_size; ++i) {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = kRecvWrId;
    if (int err = ibv_post_recv(id->qp, &wr, &bad)) return errno = err, -1;
  }
  return 0;
}

void FreeSocket(Rsocket* rs) {
  StopAcceptor(*rs);  // a listening socket's thread first: it uses the id
  RemoveSocket(rs);
  for (IomapBuffer& b : rs->iomaps) ibv_dereg_mr(b.mr);
  if (rs->smr) ibv_dereg_mr(rs->smr);
  if (rs->rmr) ibv_dereg_mr(rs->rmr);
  if (rs->target_mr) ibv_dereg_mr(rs->target_mr);
  free(rs->sbuf);
  free(rs->rbuf);
  free(rs->target_area);
  if (rs->id) {
    if (rs->cq && rs->cq_events_unacked) ibv_ack_cq_events(rs->cq, rs->cq_events_unacked);
    if (rs->id->qp || rs->id->recv_cq) rdma_destroy_qp(rs->id);
    if (rs->id->event) {
      rdma_ack_cm_event(rs->id->event);
      rs->id->event = nullptr;
    }
    rdma_destroy_id(rs->id);
  }
  delete rs;
}

}  // namespace softverbs::rdmacm::rs
