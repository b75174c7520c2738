// Both ends of the two-namespace carrier test (udp_two_hosts.sh): the
// packets of test_frames.h sent through src/roce's UDP carrier from one
// network namespace and received, parsed and ICRC-checked in the other.
//
//   roce_udp_peer recv IPV4 IPV6 IFNAME READY_FILE TIMEOUT_S FAULTS
//       binds UDP 4791 on both addresses, creates READY_FILE, then waits
//       (at most TIMEOUT_S) for every test frame; exit 0 when each arrived
//       as often as expected, accepted by the parser (ICRC included) with
//       the bytes sent, from the frame's flow source port. FAULTS is the
//       sender's SOFTVERBS_ROCE_FAULTS ("-": none): the fates are then
//       known in advance (dropped: never; duplicated: twice; corrupted:
//       refused), since they follow the seed and the packet number only.
//       GRH_FILE: each accepted packet's PSN and the GRH (40 bytes, hex)
//       a UD receive buffer would get for it (check_grh.py).
//   roce_udp_peer count
//       prints how many test frames there are.
//   roce_udp_peer send IPV4 IPV6 IFNAME DST_IPV4 DST_IPV6 FILE.tsv
//       sends every test frame (IPv4 frames between the IPv4 addresses,
//       IPv6 between the IPv6 ones; through the fault injector when
//       SOFTVERBS_ROCE_FAULTS is set) and writes their table.
#include <arpa/inet.h>
#include <net/if.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "roce/udp_carrier.h"
#include "test_frames.h"

namespace {
using namespace softverbs::roce;

// An IP address as a GID (IPv4: IPv4-mapped).
bool GidOf(const char* text, uint8_t gid[16]) {
  std::memset(gid, 0, 16);
  if (inet_pton(AF_INET, text, gid + 12) == 1) {
    gid[10] = gid[11] = 0xff;
    return true;
  }
  return inet_pton(AF_INET6, text, gid) == 1;
}

struct Pair {
  UdpCarrier v4, v6;
};

bool OpenPair(const char* ipv4, const char* ipv6, const char* ifname, Pair* pair) {
  uint8_t g4[16], g6[16];
  if (!GidOf(ipv4, g4) || !GidOf(ipv6, g6)) {
    std::fprintf(stderr, "bad address %s or %s\n", ipv4, ipv6);
    return false;
  }
  const uint32_t scope = if_nametoindex(ifname);
  if (scope == 0) {
    std::perror(ifname);
    return false;
  }
  std::string error;
  if (!pair->v4.Open(g4, scope, &error) || !pair->v6.Open(g6, scope, &error)) {
    std::fprintf(stderr, "open: %s\n", error.c_str());
    return false;
  }
  return true;
}

// How many times each frame (by PSN) must be accepted, and how many packets
// refused, when the sender's carrier runs with the fault injector set to
// `faults` ("-": none). Fates follow the packet number per carrier (the
// IPv4 and the IPv6 one each count from 0), as the sender's injectors do.
bool Expect(const char* faults, const std::vector<test::TestFrame>& frames,
            std::map<uint32_t, int>* copies, int* refusals) {
  FaultConfig config;
  std::string error;
  if (std::strcmp(faults, "-") != 0 && !ParseFaultConfig(faults, &config, &error)) {
    std::fprintf(stderr, "faults: %s\n", error.c_str());
    return false;
  }
  const FaultInjector injector(config);
  uint64_t next[2] = {0, 0};
  *refusals = 0;
  for (const auto& f : frames) {
    int n = 1;
    if (config.Any()) {
      switch (injector.FateOf(next[f.ipv6]++)) {
        case Fate::kDrop:
          n = 0;
          break;
        case Fate::kDuplicate:
          n = 2;
          break;
        case Fate::kCorrupt:
          n = 0;
          ++*refusals;
          break;
        default:
          break;
      }
    }
    (*copies)[f.fields.psn] = n;
  }
  return true;
}

int Receive(char** argv) {
  Pair pair;
  if (!OpenPair(argv[2], argv[3], argv[4], &pair)) return 1;
  const auto frames = test::AllTestFrames();
  std::map<uint32_t, int> want_copies;
  int want_refused = 0;
  if (!Expect(argv[7], frames, &want_copies, &want_refused)) return 2;
  int want_accepted = 0;
  for (const auto& [psn, n] : want_copies) want_accepted += n;
  if (std::FILE* ready = std::fopen(argv[5], "w")) {
    std::fclose(ready);
  } else {
    std::perror(argv[5]);
    return 1;
  }
  std::FILE* grh_file = argv[8] ? std::fopen(argv[8], "w") : nullptr;
  if (argv[8] && !grh_file) {
    std::perror(argv[8]);
    return 1;
  }
  std::map<uint32_t, const test::TestFrame*> by_psn;
  for (const auto& f : frames) by_psn[f.fields.psn] = &f;
  std::map<uint32_t, int> copies;
  int accepted = 0, refused = 0, failures = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(std::stoi(argv[6]));
  // Until everything expected came; then 300 ms more, to see any extra copy.
  auto end = deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (accepted >= want_accepted && refused >= want_refused && end == deadline) {
      end = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(300));
    }
    pollfd fds[2] = {{pair.v4.fd(), POLLIN, 0}, {pair.v6.fd(), POLLIN, 0}};
    if (poll(fds, 2, 50) <= 0) continue;
    for (UdpCarrier* c : {&pair.v4, &pair.v6}) {
      ReceivedPacket packet;
      WireError verdict;
      std::string error;
      while (c->Receive(&packet, &verdict, &error)) {
        if (verdict != WireError::kOk) {
          ++refused;
          if (want_refused == 0) {
            std::printf("FAIL: a packet refused: %s\n", WireErrorName(verdict));
            ++failures;
          }
          continue;
        }
        const auto it = by_psn.find(packet.fields.psn);
        if (it == by_psn.end()) {
          std::printf("FAIL: unexpected PSN %u\n", packet.fields.psn);
          ++failures;
          continue;
        }
        ++accepted;
        if (grh_file) {
          // The GRH a UD receive buffer would start with, for check_grh.py.
          uint8_t grh[40];
          WriteGrh(packet.ends, packet.bytes.size(), grh);
          std::fprintf(grh_file, "%u\t", packet.fields.psn);
          for (uint8_t b : grh) std::fprintf(grh_file, "%02x", b);
          std::fprintf(grh_file, "\n");
        }
        const test::TestFrame& want = *it->second;
        ++copies[want.fields.psn];
        std::vector<uint8_t> sent(want.payload.size() + 128);
        WireError e;
        sent.resize(BuildTransport(want.fields, want.payload, sent, &e));
        const bool same_bytes = packet.bytes.size() == sent.size() + 4 &&
                                std::memcmp(packet.bytes.data(), sent.data(), sent.size()) == 0;
        if (!same_bytes || packet.ends.ipv6 != want.ipv6 ||
            packet.ends.src_port != test::SourcePortOf(want)) {
          std::printf("FAIL: frame %u (opcode 0x%02x): bytes %s, from port %u\n", want.number,
                      want.fields.opcode, same_bytes ? "same" : "differ", packet.ends.src_port);
          ++failures;
        }
      }
      if (!error.empty()) {
        std::printf("FAIL: %s\n", error.c_str());
        return 1;
      }
    }
  }
  for (const auto& [psn, n] : want_copies) {
    if (copies[psn] != n) {
      std::printf("FAIL: frame %u arrived %d times, expected %d\n", by_psn[psn]->number,
                  copies[psn], n);
      ++failures;
    }
  }
  if (refused != want_refused) {
    std::printf("FAIL: %d packets refused, expected %d\n", refused, want_refused);
    ++failures;
  }
  if (grh_file && std::fclose(grh_file) != 0) {
    std::perror(argv[8]);
    ++failures;
  }
  std::printf(
      "received %d packets (expected %d) of %zu frames, %d refused (expected %d), %d failures\n",
      accepted, want_accepted, frames.size(), refused, want_refused, failures);
  return failures == 0 ? 0 : 1;
}

int Send(char** argv) {
  Pair pair;
  if (!OpenPair(argv[2], argv[3], argv[4], &pair)) return 1;
  uint8_t dst4[16], dst6[16];
  if (!GidOf(argv[5], dst4) || !GidOf(argv[6], dst6)) {
    std::fprintf(stderr, "bad address %s or %s\n", argv[5], argv[6]);
    return 1;
  }
  const auto frames = test::AllTestFrames();
  for (const auto& f : frames) {
    std::string error;
    UdpCarrier& c = f.ipv6 ? pair.v6 : pair.v4;
    if (!c.Send(f.ipv6 ? dst6 : dst4, test::SourcePortOf(f), PathIpFields{}, f.fields, f.payload,
                &error)) {
      std::fprintf(stderr, "frame %u: %s\n", f.number, error.c_str());
      return 1;
    }
  }
  pair.v4.FlushSends();
  pair.v6.FlushSends();
  pair.v4.FlushFaults();
  pair.v6.FlushFaults();
  for (const UdpCarrier* c : {&pair.v4, &pair.v6}) {
    if (const FaultInjector* f = c->faults()) {
      const FaultCounters& n = f->counters();
      std::printf(
          "faults: %llu packets, %llu dropped, %llu duplicated, %llu reordered, "
          "%llu delayed, %llu corrupted\n",
          (unsigned long long)n.submitted, (unsigned long long)n.dropped,
          (unsigned long long)n.duplicated, (unsigned long long)n.reordered,
          (unsigned long long)n.delayed, (unsigned long long)n.corrupted);
    }
  }
  std::FILE* tsv = std::fopen(argv[7], "w");
  if (!tsv || !test::WriteTestFrames(tsv, frames) || std::fclose(tsv) != 0) {
    std::perror(argv[7]);
    return 1;
  }
  std::printf("sent %zu frames\n", frames.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "count") == 0) {
    std::printf("%zu\n", test::AllTestFrames().size());
    return 0;
  }
  if ((argc == 8 || argc == 9) && std::strcmp(argv[1], "recv") == 0) return Receive(argv);
  if (argc == 8 && std::strcmp(argv[1], "send") == 0) return Send(argv);
  std::fprintf(stderr,
               "usage: %s recv IPV4 IPV6 IFNAME READY_FILE TIMEOUT_S FAULTS [GRH_FILE]\n"
               "       %s send IPV4 IPV6 IFNAME DST_IPV4 DST_IPV6 FILE.tsv\n"
               "       %s count\n",
               argv[0], argv[0], argv[0]);
  return 2;
}
