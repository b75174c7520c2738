// Raw packet QPs and Ethernet frames for the tests of flow steering
// (docs/raw_packet.md): a frame with IPv4 and UDP headers, verbs flow rules
// on a MAC, and a raw packet QP in RTS with a buffer to send from and
// receive into. Used by it_raw_packet and devx_flow_matcher.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace softverbs::test {

// Polls cq until one completion arrives (bounded); returns 0 or 1.
inline int PollRawCq(ibv_cq* cq, ibv_wc* wc) {
  for (int spins = 0; spins < 20000000; ++spins) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n != 0) return n;
  }
  return 0;
}

constexpr uint8_t kMacA[6] = {0x02, 0, 0, 0, 0, 0x0a};
constexpr uint8_t kMacB[6] = {0x02, 0, 0, 0, 0, 0x0b};
constexpr uint8_t kMulticastMac[6] = {0x01, 0x00, 0x5e, 0, 0, 0x01};
constexpr uint32_t kFrameRoom = 2048;

// An Ethernet frame to dst from kMacA: IPv4 (10.0.0.1 -> 10.0.0.2), UDP
// from port 1234 to dst_port, then a payload of `fill` bytes; len bytes in
// all (at least the headers).
inline std::vector<uint8_t> Frame(const uint8_t dst[6], uint16_t dst_port, size_t len,
                                  uint8_t fill) {
  std::vector<uint8_t> f(len, fill);
  memcpy(&f[0], dst, 6);
  memcpy(&f[6], kMacA, 6);
  f[12] = 0x08;
  f[13] = 0x00;
  uint8_t* ip = &f[14];
  memset(ip, 0, 20);
  ip[0] = 0x45;
  const uint16_t ip_len = htons(static_cast<uint16_t>(len - 14));
  memcpy(ip + 2, &ip_len, 2);
  ip[8] = 64;
  ip[9] = IPPROTO_UDP;
  const uint8_t src_ip[4] = {10, 0, 0, 1}, dst_ip[4] = {10, 0, 0, 2};
  memcpy(ip + 12, src_ip, 4);
  memcpy(ip + 16, dst_ip, 4);
  uint8_t* udp = ip + 20;
  const uint16_t sport = htons(1234), dport = htons(dst_port);
  memcpy(udp, &sport, 2);
  memcpy(udp + 2, &dport, 2);
  const uint16_t udp_len = htons(static_cast<uint16_t>(len - 34));
  memcpy(udp + 4, &udp_len, 2);
  udp[6] = udp[7] = 0;
  return f;
}

// A flow attribute and its specs, laid out as ibv_create_flow reads them
// (every spec struct is a multiple of 4 bytes: no padding between them).
struct EthRule {
  ibv_flow_attr attr;
  ibv_flow_spec_eth eth;
};

static_assert(offsetof(EthRule, eth) == sizeof(ibv_flow_attr));

inline EthRule MacRule(const uint8_t mac[6], uint16_t priority = 0, uint32_t flags = 0) {
  EthRule r{};
  r.attr.type = IBV_FLOW_ATTR_NORMAL;
  r.attr.size = sizeof(r);
  r.attr.priority = priority;
  r.attr.num_of_specs = 1;
  r.attr.port = 1;
  r.attr.flags = flags;
  r.eth.type = IBV_FLOW_SPEC_ETH;
  r.eth.size = sizeof(r.eth);
  memcpy(r.eth.val.dst_mac, mac, 6);
  memset(r.eth.mask.dst_mac, 0xff, 6);
  return r;
}

inline ibv_flow_attr DefaultRule(ibv_flow_attr_type type) {
  ibv_flow_attr a{};
  a.type = type;
  a.size = sizeof(a);
  a.port = 1;
  return a;
}

// A raw packet QP in RTS on a CQ of its own, with a registered buffer whose
// first half it sends from and second half it receives into.
struct RawQp {
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(2 * kFrameRoom);
  ibv_mr* mr = nullptr;
};

inline bool MakeRawQp(ibv_context* ctx, ibv_pd* pd, RawQp* r) {
  r->cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  if (!r->cq) return false;
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = r->cq;
  init.qp_type = IBV_QPT_RAW_PACKET;
  init.cap = {8, 8, 1, 1, 0};
  r->qp = ibv_create_qp(pd, &init);
  r->mr = ibv_reg_mr(pd, r->buf.data(), r->buf.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!r->qp || !r->mr) return false;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  if (ibv_modify_qp(r->qp, &attr, IBV_QP_STATE | IBV_QP_PORT)) return false;
  attr.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(r->qp, &attr, IBV_QP_STATE)) return false;
  attr.qp_state = IBV_QPS_RTS;
  return ibv_modify_qp(r->qp, &attr, IBV_QP_STATE) == 0;
}

inline void FreeRawQp(RawQp* r) {
  if (r->qp) ibv_destroy_qp(r->qp);
  if (r->mr) ibv_dereg_mr(r->mr);
  if (r->cq) ibv_destroy_cq(r->cq);
}

inline int PostReceive(RawQp& r, uint64_t wr_id) {
  ibv_sge sge{reinterpret_cast<uint64_t>(r.buf.data() + kFrameRoom), kFrameRoom, r.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(r.qp, &wr, &bad);
}

// Posts frame from r's send half; returns ibv_post_send's answer.
inline int PostFrame(RawQp& r, const std::vector<uint8_t>& frame, uint64_t wr_id = 1,
                     unsigned flags = IBV_SEND_SIGNALED) {
  memcpy(r.buf.data(), frame.data(), frame.size());
  ibv_sge sge{reinterpret_cast<uint64_t>(r.buf.data()), static_cast<uint32_t>(frame.size()),
              r.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = flags;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(r.qp, &wr, &bad);
}

// Sends frame from r and returns its completion's status. The frame is
// steered within the post: once its completion is polled, every copy has
// reached its receiver's CQ.
inline ibv_wc_status SendFrame(RawQp& r, const std::vector<uint8_t>& frame) {
  if (PostFrame(r, frame) != 0) return IBV_WC_GENERAL_ERR;
  ibv_wc wc{};
  if (PollRawCq(r.cq, &wc) != 1) return IBV_WC_GENERAL_ERR;
  EXPECT_EQ(wc.opcode, IBV_WC_SEND);
  return wc.status;
}

// Whether a receive completion is in r's CQ now.
inline bool Received(RawQp& r, ibv_wc* wc) {
  return ibv_poll_cq(r.cq, 1, wc) == 1;
}

// Sets or clears CAP_NET_RAW in the calling thread's effective set (the
// permitted set keeps it, so it can come back).
inline bool SetNetRawEffective(bool on) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  if (on) {
    data[0].effective |= 1u << CAP_NET_RAW;
  } else {
    data[0].effective &= ~(1u << CAP_NET_RAW);
  }
  return syscall(SYS_capset, &header, data) == 0;
}

// Whether the calling thread may use raw packet QPs (CAP_NET_RAW effective).
inline bool HasNetRaw() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  return syscall(SYS_capget, &header, data) == 0 && (data[0].effective & (1u << CAP_NET_RAW));
}

}  // namespace softverbs::test
