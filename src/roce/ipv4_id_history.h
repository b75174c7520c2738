// When to believe that a packet's ICRC was made for an IPv4 identification
// other than the 0..127 of softverbs' own packets (icrc.h): rxe
// (__ip_select_ident) and RoCE NICs number their packets from a counter
// that moves forward by one a packet - rxe's per destination (plus a random
// step below the ticks it stood idle), a NIC's perhaps per flow - and a UDP
// socket never shows the ID.
//
// Solving the ICRC for any 16-bit ID accepts a corrupted packet with
// probability 2^-16. Accepting only an ID that follows by 1..kWindow the
// last one its source host used, or its flow (source address and UDP source
// port: a QP's) used, makes that 2 * 2^-16 * kWindow / 2^16 = 2^-19. The
// first packet of a host, and one after its counter jumped further, are
// refused (the transport sends them again), except CM MADs to QP 1 - what a
// peer usually sends first, and what has no quick resend. Every ID solved is
// remembered, accepted or not, so one refused packet is the most a jump (or
// a corrupted packet) costs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace softverbs::roce {

class Ipv4IdHistory {
 public:
  static constexpr uint16_t kWindow = 4096;
  static constexpr size_t kSources = 256;  // hosts and flows; least recently seen out first

  // A packet from IPv4 address src (network order) and UDP port src_port
  // whose ICRC fits id; gsi: it is for QP 1. Returns whether to accept it.
  bool Accept(uint32_t src, uint16_t src_port, uint16_t id, bool gsi);

 private:
  static constexpr uint16_t kAnyPort = 0;  // a host's entry (RoCE never sends from port 0)
  // Whether id follows the last ID of (src, port) by 1..kWindow (false for
  // one not seen yet); remembers id either way.
  bool Follows(uint32_t src, uint16_t port, uint16_t id);
  struct Source {
    uint16_t last_id;
    uint64_t seen;  // clock_ when last seen
  };
  std::unordered_map<uint64_t, Source> sources_;  // by address << 16 | port
  uint64_t clock_ = 0;
};

}  // namespace softverbs::roce
