// What a RoCE v2 packet costs in software (docs/roce.md, "Figures"):
//   1. building one (headers + ICRC) and parsing one (checks + ICRC), by
//      payload size, in one thread;
//   2. a ping-pong round trip through two UdpCarriers over loopback
//      (127.0.0.1 <-> 127.0.0.2, one thread each), against the same
//      ping-pong on plain UDP sockets with a payload of the same size;
//   3. the one-way packet rate of 8-byte SEND_ONLY packets through the
//      carrier, against plain sendto of the same bytes.
// It measures and prints; it asserts nothing. Run by hand:
//   build/bin/roce_carrier_cost [seconds-per-row, default 1]
#include <arpa/inet.h>
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
        b.Send(ga, 0xc002, ack, {}, &err);
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
    a.Send(gb, 0xc001, f, payload, &error);
    while (!a.Receive(&p, &v, &error)) WaitReadable(a.fd());
    rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
  }
  stop = true;
  a.Send(gb, 0xc001, f, payload, &error);  // wakes the echo thread
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

// One-way rate of 8-byte SEND_ONLY packets: carrier Send vs plain sendto.
void Rates() {
  uint8_t ga[16], gb[16];
  Gid("127.0.0.1", ga);
  Gid("127.0.0.2", gb);
  UdpCarrier a;
  std::string error;
  if (!a.Open(ga, 0, &error)) std::exit(1);
  const std::vector<uint8_t> payload(8, 1);
  TransportFields f = SendOnly();
  uint64_t n = 0;
  auto t0 = Clock::now();
  while (Since(t0) < g_seconds) {
    for (int i = 0; i < 100; ++i) {
      f.psn = PsnOf(n + i);
      a.Send(gb, 0xc001, f, payload, &error);  // nobody listens: sent and dropped
    }
    n += 100;
  }
  const double carrier = n / Since(t0);
  sockaddr_in sa_a, sa_b;
  const int s = BoundUdp("127.0.0.1", 40003, &sa_a);
  sa_b = sa_a;
  inet_pton(AF_INET, "127.0.0.2", &sa_b.sin_addr);
  sa_b.sin_port = htons(40004);
  std::vector<uint8_t> datagram(12 + 8 + 4, 1);
  n = 0;
  t0 = Clock::now();
  while (Since(t0) < g_seconds) {
    for (int i = 0; i < 100; ++i) {
      sendto(s, datagram.data(), datagram.size(), 0, reinterpret_cast<sockaddr*>(&sa_b),
             sizeof(sa_b));
    }
    n += 100;
  }
  const double plain = n / Since(t0);
  close(s);
  std::printf("8-byte SEND_ONLY packets sent per second: carrier %.0f, plain sendto %.0f (%.2fx)\n",
              carrier, plain, carrier / plain);
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
