// What a RoCE v2 packet costs in software (docs/roce.md, "Figures"):
//   1. building one (headers + ICRC) and parsing one (checks + ICRC), by
//      payload size, in one thread;
//   2. a ping-pong round trip through two UdpCarriers over loopback
//      (127.0.0.1 <-> 127.0.0.2, one thread each), against the same
//      ping-pong on plain UDP sockets with a payload of the same size;
//   3. the one-way packet rate of 8-byte SEND_ONLY packets through the
//      carrier, against plain sendto of the same bytes, and built the same
//      way but handed to the kernel 32 at a time (sendmmsg) or 64 in one
//      UDP GSO send (UDP_SEGMENT); sent and delivered (a second thread
//      counts the datagrams arriving, recvmmsg).
// It measures and prints; it asserts nothing. Run by hand:
//   build/bin/roce_carrier_cost [seconds-per-row, default 1]
#include <arpa/inet.h>
#include <linux/udp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "roce/headers.h"
#include "roce/icrc.h"
#include "roce/ip_headers.h"
#include "roce/packet.h"
#include "roce/udp_carrier.h"

using namespace softverbs::roce;
using Clock = std::chrono::steady_clock;

namespace {

double g_seconds = 1.0;

uint32_t PsnOf(uint64_t n) {
  return static_cast<uint32_t>(n) & 0xffffff;
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Endpoints LoopbackEnds() {
  Endpoints e;
  e.src[0] = 127, e.src[3] = 1;
  e.dst[0] = 127, e.dst[3] = 2;
  e.src_port = 0xc001;
  return e;
}

TransportFields SendOnly() {
  TransportFields f;
  f.opcode = 0x04;  // RC SEND_ONLY
  f.dest_qp = 0x11;
  return f;
}

void BuildAndParse() {
  std::printf("%-10s %14s %14s %16s\n", "payload", "build ns/pkt", "parse ns/pkt", "ICRC MB/s");
  for (size_t size : {size_t{8}, size_t{256}, size_t{1024}, size_t{4096}}) {
    std::vector<uint8_t> payload(size, 0x5a), buf(size + 128);
    WireError e;
    size_t len = 0;
    uint64_t n = 0;
    auto t0 = Clock::now();
    while (Since(t0) < g_seconds) {
      for (int i = 0; i < 1000; ++i)
        len = BuildPacket(LoopbackEnds(), SendOnly(), payload, buf, &e);
      n += 1000;
    }
    const double build_ns = Since(t0) * 1e9 / n;
    ParsedPacket p;
    n = 0;
    t0 = Clock::now();
    while (Since(t0) < g_seconds) {
      for (int i = 0; i < 1000; ++i) {
        if (ParsePacket(std::span(buf).first(len), &p) != WireError::kOk) std::abort();
      }
      n += 1000;
    }
    const double parse_ns = Since(t0) * 1e9 / n;
    const size_t head = IpUdpBytes(false);
    const std::span<const uint8_t> roce(buf.data() + head, len - head - kIcrcBytes);
    uint32_t sink = 0;
    n = 0;
    t0 = Clock::now();
    while (Since(t0) < g_seconds) {
      for (int i = 0; i < 1000; ++i) sink ^= ComputeIcrc(std::span(buf).first(head), roce);
      n += 1000;
    }
    const double icrc_mbs = static_cast<double>(len) * n / Since(t0) / 1e6;
    std::printf("%-10zu %14.0f %14.0f %16.0f%s\n", size, build_ns, parse_ns, icrc_mbs,
                sink == 0x12345678 ? " " : "");
  }
}

bool Gid(const char* ipv4, uint8_t gid[16]) {
  std::memset(gid, 0, 16);
  gid[10] = gid[11] = 0xff;
  return inet_pton(AF_INET, ipv4, gid + 12) == 1;
}

void WaitReadable(int fd) {
  pollfd p{fd, POLLIN, 0};
  poll(&p, 1, 1000);
}

// Round trips through two carriers; returns the median in microseconds.
double CarrierPingPong(size_t payload_size, uint64_t* count) {
  uint8_t ga[16], gb[16];
  Gid("127.0.0.1", ga);
  Gid("127.0.0.2", gb);
  UdpCarrier a, b;
  std::string error;
  if (!a.Open(ga, 0, &error) || !b.Open(gb, 0, &error)) {
    std::fprintf(stderr, "carrier: %s\n", error.c_str());
    std::exit(1);
  }
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    ReceivedPacket p;
    WireError v;
    std::string err;
    TransportFields ack;
    ack.opcode = 0x11;  // ACKNOWLEDGE
    while (!stop) {
      WaitReadable(b.fd());
      while (b.Receive(&p, &v, &err)) {
        ack.psn = p.fields.psn;
        b.Send(ga, 0xc002, PathIpFields{}, ack, {}, &err);
        b.FlushSends();
      }
    }
  });
  std::vector<uint8_t> payload(payload_size, 1);
  std::vector<double> rtts;
  TransportFields f = SendOnly();
  ReceivedPacket p;
  WireError v;
  const auto t0 = Clock::now();
  while (Since(t0) < g_seconds) {
    f.psn = PsnOf(rtts.size());
    const auto s = Clock::now();
    a.Send(gb, 0xc001, PathIpFields{}, f, payload, &error);
    a.FlushSends();
    while (!a.Receive(&p, &v, &error)) WaitReadable(a.fd());
    rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
  }
  stop = true;
  a.Send(gb, 0xc001, PathIpFields{}, f, payload, &error);  // wakes the echo thread
  a.FlushSends();
  echo.join();
  std::sort(rtts.begin(), rtts.end());
  *count = rtts.size();
  return rtts[rtts.size() / 2];
}

int BoundUdp(const char* ip, uint16_t port, sockaddr_in* sa) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  std::memset(sa, 0, sizeof(*sa));
  sa->sin_family = AF_INET;
  sa->sin_port = htons(port);
  inet_pton(AF_INET, ip, &sa->sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(sa), sizeof(*sa)) != 0) {
    std::perror("bind");
    std::exit(1);
  }
  return fd;
}

// The same ping-pong on plain UDP sockets (datagrams of the RoCE packet's
// size), waiting the same way (try, poll, receive) as the carrier's loop.
double UdpPingPong(size_t datagram_size, uint64_t* count) {
  sockaddr_in sa_a, sa_b;
  const int a = BoundUdp("127.0.0.1", 40001, &sa_a), b = BoundUdp("127.0.0.2", 40002, &sa_b);
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    std::vector<uint8_t> buf(65536);
    while (!stop) {
      WaitReadable(b);
      ssize_t n;
      while ((n = recv(b, buf.data(), buf.size(), MSG_DONTWAIT)) > 0) {
        sendto(b, buf.data(), 16, 0, reinterpret_cast<sockaddr*>(&sa_a), sizeof(sa_a));
      }
    }
  });
  std::vector<uint8_t> buf(65536, 1);
  std::vector<double> rtts;
  const auto t0 = Clock::now();
  while (Since(t0) < g_seconds) {
    const auto s = Clock::now();
    sendto(a, buf.data(), datagram_size, 0, reinterpret_cast<sockaddr*>(&sa_b), sizeof(sa_b));
    while (recv(a, buf.data(), buf.size(), MSG_DONTWAIT) < 0) WaitReadable(a);
    rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
  }
  stop = true;
  sendto(a, buf.data(), 1, 0, reinterpret_cast<sockaddr*>(&sa_b), sizeof(sa_b));
  echo.join();
  close(a);
  close(b);
  std::sort(rtts.begin(), rtts.end());
  *count = rtts.size();
  return rtts[rtts.size() / 2];
}

// Counts the datagrams arriving at 127.0.0.2:port while send() runs for
// g_seconds; prints packets sent and delivered per second.
template <typename Send>
void Rate(const char* name, uint16_t port, Send send) {
  sockaddr_in sa;
  const int r = BoundUdp("127.0.0.2", port, &sa);
  const int big = 8 << 20;
  setsockopt(r, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> delivered{0};
  std::thread counter([&] {
    constexpr int kBatch = 64;
    std::vector<std::vector<uint8_t>> bufs(kBatch, std::vector<uint8_t>(2048));
    std::vector<iovec> iovs(kBatch);
    std::vector<mmsghdr> msgs(kBatch);
    for (int i = 0; i < kBatch; ++i) {
      iovs[i] = {bufs[i].data(), bufs[i].size()};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    while (true) {
      const int got = recvmmsg(r, msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
      if (got > 0) {
        delivered += static_cast<uint64_t>(got);
      } else if (stop) {
        break;
      } else {
        WaitReadable(r);
      }
    }
  });
  uint64_t sent = 0;
  const auto t0 = Clock::now();
  while (Since(t0) < g_seconds) sent += send(sent);
  const double seconds = Since(t0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the queue drain
  stop = true;
  counter.join();
  close(r);
  std::printf("%-34s %12.0f %12.0f\n", name, sent / seconds, delivered / seconds);
}

// One-way rate of 8-byte SEND_ONLY packets from one thread: through the
// carrier, as plain sendto of the same bytes, built the same way and handed
// over 32 per sendmmsg, or 64 per sendmsg with UDP GSO.
void Rates() {
  std::printf("%-34s %12s %12s\n", "8-byte SEND_ONLY, one sender", "sent/s", "delivered/s");
  uint8_t ga[16], gb[16];
  Gid("127.0.0.1", ga);
  Gid("127.0.0.2", gb);
  UdpCarrier a;
  std::string error;
  if (!a.Open(ga, 0, &error)) std::exit(1);
  const std::vector<uint8_t> payload(8, 1);
  TransportFields f = SendOnly();
  // The carrier gathers them into runs of 64 (one UDP GSO send each).
  Rate("carrier Send (GSO runs)", kRoceV2Port, [&](uint64_t n) {
    for (int i = 0; i < 100; ++i) {
      f.psn = PsnOf(n + i);
      a.Send(gb, 0xc001, PathIpFields{}, f, payload, &error);
    }
    a.FlushSends();
    return 100;
  });

  sockaddr_in sa_a, sa_b;
  const int s = BoundUdp("127.0.0.1", 40003, &sa_a);
  sa_b = sa_a;
  inet_pton(AF_INET, "127.0.0.2", &sa_b.sin_addr);
  sa_b.sin_port = htons(40004);
  const std::vector<uint8_t> datagram(sizeof(Bth) + 8 + kIcrcBytes, 1);
  Rate("plain sendto (same bytes)", 40004, [&](uint64_t) {
    for (int i = 0; i < 100; ++i) {
      sendto(s, datagram.data(), datagram.size(), 0, reinterpret_cast<sockaddr*>(&sa_b),
             sizeof(sa_b));
    }
    return 100;
  });

  // Built as the carrier builds them (headers + ICRC over the IP/UDP header
  // the kernel writes), 32 per sendmmsg.
  constexpr int kBatch = 32;
  Endpoints ends = LoopbackEnds();
  ends.src_port = 40003;
  ends.dst_port = 40004;
  const size_t head = IpUdpBytes(false);
  std::vector<std::vector<uint8_t>> bufs(kBatch, std::vector<uint8_t>(128));
  std::vector<iovec> iovs(kBatch);
  std::vector<mmsghdr> msgs(kBatch);
  Rate("built, 32 per sendmmsg", 40004, [&](uint64_t n) {
    for (int i = 0; i < kBatch; ++i) {
      f.psn = PsnOf(n + i);
      uint8_t* buf = bufs[i].data();
      WireError e;
      const size_t transport =
          BuildTransport(f, payload, std::span(buf + head, 128 - head - kIcrcBytes), &e);
      WriteIpUdp(ends, transport + kIcrcBytes, buf);
      StoreIcrc(ComputeIcrc(std::span(buf, head), std::span(buf + head, transport)),
                buf + head + transport);
      iovs[i] = {buf + head, transport + kIcrcBytes};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_name = &sa_b;
      msgs[i].msg_hdr.msg_namelen = sizeof(sa_b);
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    return static_cast<uint64_t>(std::max(0, sendmmsg(s, msgs.data(), kBatch, 0)));
  });

  // UDP GSO: 64 equal-size packets (one QP's run of 8-byte messages) in one
  // sendmsg with UDP_SEGMENT. Only a rate: every ICRC here is computed over
  // the header of the whole run, while a run cut into packets on a wire
  // (a NIC's segmentation or the kernel's fallback) gives segment k IPv4 ID
  // k (inet_gso_segment); on loopback and veth runs are cut only at the
  // receiving socket. A carrier using GSO must compute each ICRC over its
  // segment's ID.
  constexpr int kSegments = 64;
  const size_t packet = sizeof(Bth) + payload.size() + kIcrcBytes;
  std::vector<uint8_t> run(packet * kSegments), scratch(head + packet);
  WriteIpUdp(ends, packet, scratch.data());
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(uint16_t))] = {};
  Rate("built, 64 per sendmsg with UDP GSO", 40004, [&](uint64_t n) -> uint64_t {
    for (int i = 0; i < kSegments; ++i) {
      f.psn = PsnOf(n + i);
      uint8_t* p = run.data() + i * packet;
      WireError e;
      const size_t transport = BuildTransport(f, payload, std::span(p, packet - kIcrcBytes), &e);
      StoreIcrc(ComputeIcrc(std::span(scratch.data(), head), std::span(p, transport)),
                p + transport);
    }
    iovec iov{run.data(), run.size()};
    msghdr msg{};
    msg.msg_name = &sa_b;
    msg.msg_namelen = sizeof(sa_b);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = IPPROTO_UDP;  // SOL_UDP
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    const auto gso_size = static_cast<uint16_t>(packet);
    std::memcpy(CMSG_DATA(c), &gso_size, sizeof(gso_size));
    return sendmsg(s, &msg, 0) > 0 ? kSegments : 0;
  });

  close(s);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_seconds = std::atof(argv[1]);
  std::printf("RoCE v2 packet cost (one core; loopback 127.0.0.1 <-> 127.0.0.2)\n\n");
  BuildAndParse();
  std::printf("\n%-10s %20s %20s\n", "payload", "carrier RTT us (p50)", "plain UDP RTT us");
  for (size_t size : {size_t{8}, size_t{1024}}) {
    uint64_t n1, n2;
    const double c = CarrierPingPong(size, &n1);
    const double u = UdpPingPong(12 + size + 4, &n2);
    std::printf("%-10zu %20.1f %20.1f   (%llu / %llu round trips)\n", size, c, u,
                (unsigned long long)n1, (unsigned long long)n2);
  }
  std::printf("\n");
  Rates();
  return 0;
}
