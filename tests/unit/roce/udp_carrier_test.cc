// The UDP carrier (src/roce/udp_carrier.h) on loopback, which needs no root
// (the two-namespace tests in tests/integration/roce_wire need ip netns):
// every opcode from 127.0.0.3 to 127.0.0.4 arrives, parsed and checked;
// garbage is refused and counted; Open's errors say what is wrong.
#include "roce/udp_carrier.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <linux/udp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "datapath/ibta_opcode.h"
#include "roce/flow.h"
#include "roce/ip_headers.h"

// Linux before commit 1382e3b6a350 (6.11; backported to the 2024 stable
// kernels) refuses a UDP GSO send of more than 64 segments with EINVAL
// (udp_send_skb: datalen > gso_size * UDP_MAX_SEGMENTS). This machine's
// kernel takes 128, so a test that sets older_kernel_max_segments gets that
// answer from this sendmsg, which stands in for the kernel's in this test
// program only (the executable's definition comes before libc's) and passes
// everything else to libc's.
namespace {
size_t older_kernel_max_segments = 0;  // 0: the kernel's own answer
int older_kernel_refusals = 0;
}  // namespace

extern "C" ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  using Sendmsg = ssize_t (*)(int, const msghdr*, int);
  static const Sendmsg libc_sendmsg = reinterpret_cast<Sendmsg>(dlsym(RTLD_NEXT, "sendmsg"));
  if (older_kernel_max_segments > 0) {
    for (cmsghdr* c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(const_cast<msghdr*>(msg), c)) {
      if (c->cmsg_level != IPPROTO_UDP || c->cmsg_type != UDP_SEGMENT) continue;
      uint16_t segment = 0;
      std::memcpy(&segment, CMSG_DATA(c), sizeof(segment));
      size_t bytes = 0;
      for (size_t i = 0; i < msg->msg_iovlen; ++i) bytes += msg->msg_iov[i].iov_len;
      if (bytes > segment * older_kernel_max_segments) {
        ++older_kernel_refusals;
        errno = EINVAL;
        return -1;
      }
    }
  }
  return libc_sendmsg(fd, msg, flags);
}

namespace softverbs::roce {
namespace {
namespace dp = softverbs::datapath;

void Gid(const char* ipv4, uint8_t gid[16]) {
  std::memset(gid, 0, 16);
  gid[10] = gid[11] = 0xff;
  ASSERT_EQ(inet_pton(AF_INET, ipv4, gid + 12), 1);
}

// Receives until want packets came or 5 s passed (a bound, not a timing).
std::vector<std::pair<ReceivedPacket, WireError>> ReceiveUpTo(UdpCarrier& c, size_t want) {
  std::vector<std::pair<ReceivedPacket, WireError>> out;
  for (int i = 0; i < 500 && out.size() < want; ++i) {
    pollfd p{c.fd(), POLLIN, 0};
    poll(&p, 1, 10);
    ReceivedPacket packet;
    WireError verdict;
    std::string error;
    while (c.Receive(&packet, &verdict, &error)) out.emplace_back(std::move(packet), verdict);
    EXPECT_EQ(error, "");
  }
  return out;
}

// Every test starts without fault injection (one that wants it sets it),
// with a sender `a` and a receiver `b` to open on loopback addresses.
class RoceUdpCarrier : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv(kFaultsEnvironmentVariable); }
  // Opens the receiver on `ip`; false, with why, when this machine cannot
  // bind UDP 4791 there (the test skips).
  bool OpenReceiver(const char* ip, std::string* why) {
    Gid(ip, gb);
    if (b.Open(gb, 0, why)) return true;
    *why = std::string("cannot bind UDP 4791 on ") + ip + ": " + *why;
    return false;
  }
  bool OpenSender(const char* ip, std::string* why) {
    Gid(ip, ga);
    return a.Open(ga, 0, why);
  }
  uint8_t ga[16] = {};
  uint8_t gb[16] = {};
  UdpCarrier a, b;
  std::string error;
};

TEST_F(RoceUdpCarrier, EveryOpcodeOverLoopback) {
  if (!OpenReceiver("127.0.0.4", &error)) GTEST_SKIP() << error;
  ASSERT_TRUE(OpenSender("127.0.0.3", &error)) << error;
  std::map<uint32_t, uint8_t> sent;  // PSN -> opcode
  for (int op = 0; op < 256; ++op) {
    if (!dp::IbtaOpcodeValid(static_cast<uint8_t>(op))) continue;
    TransportFields f;
    f.opcode = static_cast<uint8_t>(op);
    f.dest_qp = 0x42;
    f.psn = 0x100 + op;
    f.src_qp = 0x77;
    f.imm = 0x1234;
    const std::vector<uint8_t> payload(
        dp::IbtaOperationRow(dp::OperationOfOpcode(f.opcode)).payload ? 33 : 0, 0xab);
    ASSERT_TRUE(a.Send(gb, SourcePortOfQpn(0x77), PathIpFields{}, f, payload, &error)) << error;
    sent[f.psn] = f.opcode;
  }
  a.FlushSends();
  const auto received = ReceiveUpTo(b, sent.size());
  ASSERT_EQ(received.size(), sent.size());
  for (const auto& [packet, verdict] : received) {
    EXPECT_EQ(verdict, WireError::kOk) << WireErrorName(verdict);
    ASSERT_EQ(sent.count(packet.fields.psn), 1u);
    EXPECT_EQ(packet.fields.opcode, sent[packet.fields.psn]);
    EXPECT_EQ(packet.ends.src_port, SourcePortOfQpn(0x77));
    EXPECT_EQ(packet.ends.hop_limit, 64);  // the kernel's default TTL, from IP_RECVTTL
    const uint8_t from[4] = {127, 0, 0, 3};
    EXPECT_EQ(std::memcmp(packet.ends.src, from, 4), 0);
    sent.erase(packet.fields.psn);
  }
  EXPECT_EQ(b.counters().received, 62u);  // every valid opcode (packet_test.cc)
  EXPECT_EQ(a.counters().sent, 62u);
}

// A packet leaves with its path's traffic class and hop limit (an AH's or a
// QP path's GRH: IPv4 TOS and TTL), as the receiving kernel reports them
// (IP_RECVTOS, IP_RECVTTL); packets of two paths to one destination, several
// of each (runs: one GSO send per path), keep theirs.
TEST_F(RoceUdpCarrier, PacketsLeaveWithTheirPathsTosAndTtl) {
  if (!OpenReceiver("127.0.0.27", &error)) GTEST_SKIP() << error;
  ASSERT_TRUE(OpenSender("127.0.0.26", &error)) << error;
  const PathIpFields paths[] = {{0x28, 17}, {0xb8, 200}};  // DSCP 10 and 46 (EF)
  std::map<uint32_t, PathIpFields> sent;                   // PSN -> path
  for (uint32_t i = 0; i < 12; ++i) {
    TransportFields f;
    f.opcode = dp::IbtaOpcode(dp::IbtaTransport::kUd, dp::IbtaOperation::kSendOnly);
    f.dest_qp = 0x42;
    f.src_qp = 0x77;
    f.qkey = 0x1111;
    f.psn = 0x300 + i;
    const PathIpFields& path = paths[i / 3 % 2];  // three of one, three of the other, ...
    ASSERT_TRUE(a.Send(gb, SourcePortOfQpn(0x77), path, f, std::vector<uint8_t>(64, 0xcd), &error))
        << error;
    sent[f.psn] = path;
  }
  a.FlushSends();
  const auto received = ReceiveUpTo(b, sent.size());
  ASSERT_EQ(received.size(), sent.size());
  for (const auto& [packet, verdict] : received) {
    EXPECT_EQ(verdict, WireError::kOk) << WireErrorName(verdict);
    ASSERT_EQ(sent.count(packet.fields.psn), 1u);
    const PathIpFields& path = sent[packet.fields.psn];
    EXPECT_EQ(packet.ends.traffic_class, path.traffic_class) << "PSN " << packet.fields.psn;
    EXPECT_EQ(packet.ends.hop_limit, path.hop_limit) << "PSN " << packet.fields.psn;
  }
}

TEST_F(RoceUdpCarrier, GarbageIsRefusedAndCounted) {
  if (!OpenReceiver("127.0.0.5", &error)) GTEST_SKIP() << error;
  const int s = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(kRoceV2Port);
  inet_pton(AF_INET, "127.0.0.5", &to.sin_addr);
  const uint8_t short_packet[8] = {4, 0, 0xff, 0xff, 0, 0, 0, 1};
  uint8_t bad_icrc[12 + 4] = {4, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 1, 1, 2, 3, 4};
  sendto(s, short_packet, sizeof(short_packet), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
  sendto(s, bad_icrc, sizeof(bad_icrc), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
  close(s);
  const auto received = ReceiveUpTo(b, 2);
  ASSERT_EQ(received.size(), 2u);
  EXPECT_EQ(received[0].second, WireError::kTooShort);
  EXPECT_EQ(received[1].second, WireError::kBadIcrc);
  EXPECT_EQ(b.counters().refused[static_cast<size_t>(WireError::kBadIcrc)], 1u);
  EXPECT_EQ(b.counters().refused[static_cast<size_t>(WireError::kTooShort)], 1u);
  EXPECT_EQ(b.counters().received, 0u);
}

TEST_F(RoceUdpCarrier, RunsOfEqualPacketsLeaveAsOneGsoSend) {
  if (!OpenReceiver("127.0.0.10", &error)) GTEST_SKIP() << error;
  ASSERT_TRUE(OpenSender("127.0.0.9", &error)) << error;
  // kIcrcIpv4Ids + 6 SEND MIDDLE packets of 256 bytes and a shorter SEND
  // LAST: runs of kIcrcIpv4Ids (128) packets, the second ended by the
  // shorter one.
  constexpr uint32_t kPackets = kIcrcIpv4Ids + 7;
  for (uint32_t i = 0; i < kPackets; ++i) {
    TransportFields f;
    f.opcode = i + 1 == kPackets ? 0x02 : 0x01;  // RC SEND LAST / MIDDLE
    f.dest_qp = 0x42;
    f.psn = 0x500 + i;
    const std::vector<uint8_t> payload(i + 1 == kPackets ? 100 : 256, static_cast<uint8_t>(i));
    ASSERT_TRUE(a.Send(gb, SourcePortOfQpn(0x77), PathIpFields{}, f, payload, &error)) << error;
  }
  EXPECT_EQ(a.counters().sent, kIcrcIpv4Ids);  // the first run went when full; the rest waits
  EXPECT_EQ(a.counters().gso_sends, 1u);
  a.FlushSends();
  EXPECT_EQ(a.counters().sent, kPackets);
  EXPECT_EQ(a.counters().gso_sends, 2u);
  const auto received = ReceiveUpTo(b, kPackets);
  ASSERT_EQ(received.size(), kPackets);
  for (uint32_t i = 0; i < kPackets; ++i) {
    // Segment k of a run carried IPv4 ID k, and its ICRC says so.
    EXPECT_EQ(received[i].second, WireError::kOk) << i << ": " << WireErrorName(received[i].second);
    EXPECT_EQ(received[i].first.fields.psn, 0x500 + i);
    ASSERT_EQ(received[i].first.payload.size(), i + 1 == kPackets ? 100u : 256u);
    EXPECT_EQ(received[i].first.payload[0], static_cast<uint8_t>(i));
  }
}

// On a kernel that takes 64 segments a send, the first run of 100 is
// refused whole and goes as 64 + 36, the second part's ICRCs made anew for
// the IDs its own send gives it (0..35: the receiver solves each packet's
// ID from its ICRC, so a wrong one shows as 64 + k); runs stop at 64 from
// then on, with no other refusal.
TEST_F(RoceUdpCarrier, AnOlderKernelsLimitOf64SegmentsSplitsTheRun) {
  if (!OpenReceiver("127.0.0.14", &error)) GTEST_SKIP() << error;
  ASSERT_TRUE(OpenSender("127.0.0.13", &error)) << error;
  older_kernel_max_segments = 64;
  older_kernel_refusals = 0;
  constexpr uint32_t kPackets = 100;
  for (int round = 0; round < 2; ++round) {
    for (uint32_t i = 0; i < kPackets; ++i) {
      TransportFields f;
      f.opcode = 0x0a;  // RC RDMA WRITE ONLY
      f.dest_qp = 0x42;
      f.psn = round * kPackets + i;
      f.va = 0x1000;
      f.rkey = 0x55;
      f.dma_len = 8;
      const std::vector<uint8_t> payload(8, static_cast<uint8_t>(i));
      ASSERT_TRUE(a.Send(gb, SourcePortOfQpn(0x78), PathIpFields{}, f, payload, &error)) << error;
    }
    a.FlushSends();
    const auto received = ReceiveUpTo(b, kPackets);
    ASSERT_EQ(received.size(), kPackets);
    for (uint32_t i = 0; i < kPackets; ++i) {
      ASSERT_EQ(received[i].second, WireError::kOk)
          << i << ": " << WireErrorName(received[i].second);
      EXPECT_EQ(received[i].first.fields.psn, round * kPackets + i);
      EXPECT_EQ(received[i].first.ends.ipv4_id, i < 64 ? i : i - 64) << i;
      EXPECT_EQ(received[i].first.payload[0], static_cast<uint8_t>(i));
    }
  }
  EXPECT_EQ(older_kernel_refusals, 1);  // the first run only
  EXPECT_EQ(a.counters().sent, 2 * kPackets);
  EXPECT_EQ(a.counters().gso_sends, 4u);  // 64 + 36, twice
  EXPECT_EQ(a.counters().send_errors, 0u);
  older_kernel_max_segments = 0;
}

size_t OpenDescriptors() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

// Raises the soft RLIMIT_NOFILE to leave `more` descriptors free; false
// (with *why) when the hard limit does not allow it.
bool RoomForDescriptors(size_t more, std::string* why) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return *why = "getrlimit failed", false;
  const rlim_t needed = OpenDescriptors() + more;
  if (limit.rlim_cur >= needed) return true;
  if (limit.rlim_max < needed) return *why = "RLIMIT_NOFILE below " + std::to_string(needed), false;
  limit.rlim_cur = needed;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return *why = "setrlimit failed", false;
  return true;
}

// Sends one RC SEND from each of `flows` flow ports (0xc000 + i, PSN i).
bool SendFromFlows(UdpCarrier& c, const uint8_t dst_gid[16], size_t flows, std::string* error) {
  TransportFields f;
  f.opcode = 0x04;  // RC SEND only
  f.dest_qp = 0x12;
  for (size_t i = 0; i < flows; ++i) {
    f.psn = static_cast<uint32_t>(i);
    if (!c.Send(dst_gid, static_cast<uint16_t>(0xc000 + i), PathIpFields{}, f, {}, error))
      return false;
  }
  return true;
}

// A carrier keeps at most kMaxSendSockets flow sockets: the oldest is
// closed when another is needed (its packets went first), and its flow gets
// a socket again at its next packet.
TEST_F(RoceUdpCarrier, FlowSocketsPastTheLimitCloseTheOldest) {
  constexpr size_t kExtra = 8;
  constexpr size_t kFlows = UdpCarrier::kMaxSendSockets + kExtra;
  if (!RoomForDescriptors(kFlows + 64, &error)) GTEST_SKIP() << error;
  if (!OpenReceiver("127.0.0.18", &error)) GTEST_SKIP() << error;
  ASSERT_TRUE(OpenSender("127.0.0.17", &error)) << error;
  const size_t before = OpenDescriptors();
  ASSERT_TRUE(SendFromFlows(a, gb, kFlows, &error)) << error;
  a.FlushSends();
  const size_t sockets = OpenDescriptors() - before;
  auto received = ReceiveUpTo(b, kFlows);
  ASSERT_EQ(received.size(), kFlows);
  for (const auto& [packet, verdict] : received) {
    EXPECT_EQ(verdict, WireError::kOk) << WireErrorName(verdict);
    EXPECT_EQ(packet.ends.src_port, 0xc000 + packet.fields.psn);
  }
  EXPECT_EQ(sockets, UdpCarrier::kMaxSendSockets);
  EXPECT_EQ(a.counters().send_sockets_closed, kExtra);
  // The first flow's socket was closed: its next packet makes one anew
  // (closing the oldest then, the ninth flow's).
  TransportFields f;
  f.opcode = 0x04;
  f.dest_qp = 0x12;
  f.psn = 0x1000;
  ASSERT_TRUE(a.Send(gb, 0xc000, PathIpFields{}, f, {}, &error)) << error;
  a.FlushSends();
  received = ReceiveUpTo(b, 1);
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].first.fields.psn, 0x1000u);
  EXPECT_EQ(received[0].first.ends.src_port, 0xc000);
  EXPECT_EQ(a.counters().send_sockets_closed, kExtra + 1);
  EXPECT_EQ(OpenDescriptors() - before, UdpCarrier::kMaxSendSockets);
}

// Packets the fault injector holds name their route by index: closing the
// oldest flow socket sends them first, through their own sockets, before a
// route's slot can be reused. Every packet is delayed (and nothing here
// calls PollFaults, which would release them when due), so only that flush
// sends the first kMaxSendSockets.
TEST_F(RoceUdpCarrier, ClosingAFlowSocketSendsTheHeldPacketsFirst) {
  setenv(kFaultsEnvironmentVariable, "delay=1,delay_us=10000000,seed=3", 1);
  constexpr size_t kFlows = UdpCarrier::kMaxSendSockets + 1;
  if (!RoomForDescriptors(kFlows + 64, &error)) GTEST_SKIP() << error;
  if (!OpenReceiver("127.0.0.20", &error)) GTEST_SKIP() << error;
  ASSERT_TRUE(OpenSender("127.0.0.19", &error)) << error;
  unsetenv(kFaultsEnvironmentVariable);
  ASSERT_TRUE(SendFromFlows(a, gb, kFlows, &error)) << error;
  const auto received = ReceiveUpTo(b, UdpCarrier::kMaxSendSockets);
  ASSERT_EQ(received.size(), UdpCarrier::kMaxSendSockets);
  for (const auto& [packet, verdict] : received) {
    EXPECT_EQ(verdict, WireError::kOk) << WireErrorName(verdict);
    EXPECT_LT(packet.fields.psn, UdpCarrier::kMaxSendSockets);
    EXPECT_EQ(packet.ends.src_port, 0xc000 + packet.fields.psn);
  }
  EXPECT_EQ(a.counters().send_sockets_closed, 1u);
  EXPECT_EQ(a.counters().send_errors, 0u);
  // The last flow's packet is still held; the flush sends it.
  a.FlushFaults();
  const auto last = ReceiveUpTo(b, 1);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].first.fields.psn, kFlows - 1);
}

TEST_F(RoceUdpCarrier, BusyFlowPortFallsBackToAnother) {
  // Another socket holds the flow port on the sender's address.
  const uint16_t flow_port = SourcePortOfQpn(0x99);
  const int squatter = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(flow_port);
  inet_pton(AF_INET, "127.0.0.7", &sa.sin_addr);
  if (bind(squatter, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(squatter);
    GTEST_SKIP() << "cannot take the flow port for the test";
  }
  if (!OpenReceiver("127.0.0.8", &error)) {
    close(squatter);
    GTEST_SKIP() << error;
  }
  ASSERT_TRUE(OpenSender("127.0.0.7", &error)) << error;
  TransportFields f;
  f.opcode = 0x04;
  f.dest_qp = 0x12;
  ASSERT_TRUE(a.Send(gb, flow_port, PathIpFields{}, f, {}, &error)) << error;
  a.FlushSends();
  const auto received = ReceiveUpTo(b, 1);
  close(squatter);
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].second, WireError::kOk);  // the ICRC covers the port that went
  EXPECT_NE(received[0].first.ends.src_port, flow_port);
}

TEST_F(RoceUdpCarrier, OpenErrorsSayWhatIsWrong) {
  uint8_t g[16];
  Gid("127.0.0.6", g);
  setenv(kFaultsEnvironmentVariable, "drop=2", 1);
  UdpCarrier bad_faults;
  EXPECT_FALSE(bad_faults.Open(g, 0, &error));
  EXPECT_EQ(error, "SOFTVERBS_ROCE_FAULTS: drop=2: not a fraction between 0 and 1");
  setenv(kFaultsEnvironmentVariable, "drop=0.5,seed=3", 1);
  UdpCarrier with_faults;
  if (!with_faults.Open(g, 0, &error)) GTEST_SKIP() << error;
  ASSERT_NE(with_faults.faults(), nullptr);
  EXPECT_FALSE(with_faults.Open(g, 0, &error));
  EXPECT_EQ(error, "the carrier is already open");
  unsetenv(kFaultsEnvironmentVariable);
  // An address this host does not have (TEST-NET-2, never assigned here).
  uint8_t elsewhere[16];
  Gid("198.51.100.77", elsewhere);
  UdpCarrier foreign;
  EXPECT_FALSE(foreign.Open(elsewhere, 0, &error));
  EXPECT_EQ(error, "bind of UDP 4791: Cannot assign requested address");
  // Another IP version than the carrier's.
  uint8_t v6[16] = {0xfe, 0x80};
  v6[15] = 2;
  EXPECT_FALSE(with_faults.Send(v6, 0xc000, PathIpFields{}, TransportFields{}, {}, &error));
  EXPECT_EQ(error, "destination GID and local GID are of different IP versions");
}

}  // namespace
}  // namespace softverbs::roce
