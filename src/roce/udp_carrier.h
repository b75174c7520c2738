// A skeleton of the RoCEv2 packet carrier over UDP sockets: no root needed
// (port 4791 is not privileged). It receives on UDP 4791 of one GID's
// address and sends each QP's packets from that QP's flow source port
// (flow.h) on the same address, so the packets on the wire are the ones a
// kernel rxe or a RoCE NIC sends: the kernel writes the IP and UDP headers,
// the carrier the transport part and an ICRC over the headers the kernel
// will write (IPv4: DF set and, on an unconnected socket with DF, ID 0 -
// Linux's ip_select_ident - as rxe sends; the variant fields are masked).
// Not yet under the transport engine; the fault injector is not in front of
// it yet either.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "roce/packet.h"

namespace softverbs::roce {

// A GID as an address: IPv4-mapped GIDs (::ffff:a.b.c.d) are IPv4.
bool GidIsIpv4(const uint8_t gid[16]);
// Fills ends->src or ->dst (and ipv6) from a GID.
void SetAddressFromGid(const uint8_t gid[16], bool source, Endpoints* ends);

struct ReceivedPacket {
  Endpoints ends;                    // as the packet came (the masked fields zero)
  TransportFields fields;            // its headers
  std::vector<uint8_t> bytes;        // the UDP payload: BTH up to the ICRC
  std::span<const uint8_t> payload;  // inside bytes, without pad (not valid in a copy)
};

class UdpCarrier {
 public:
  UdpCarrier() = default;
  ~UdpCarrier();
  UdpCarrier(const UdpCarrier&) = delete;
  UdpCarrier& operator=(const UdpCarrier&) = delete;

  // Binds UDP 4791 on the GID's address; scope_id is the interface index
  // (needed for link-local IPv6 GIDs). False with *error.
  bool Open(const uint8_t gid[16], uint32_t scope_id, std::string* error);

  // The receive socket (non-blocking), for poll/epoll.
  int fd() const { return recv_fd_; }

  // Sends one packet to dst_gid from the flow source port src_port (a
  // socket bound to it is made on first use). False with *error.
  bool Send(const uint8_t dst_gid[16], uint16_t src_port, const TransportFields& fields,
            std::span<const uint8_t> payload, std::string* error);

  // Takes one packet from the receive socket. kOk: *out holds it; any
  // other WireError: a packet arrived and was refused for that reason;
  // false: nothing to read (or a socket error, in *error).
  bool Receive(ReceivedPacket* out, WireError* verdict, std::string* error);

 private:
  int SendSocket(uint16_t src_port, std::string* error);

  Endpoints local_;  // our address, in src
  uint32_t scope_id_ = 0;
  int recv_fd_ = -1;
  std::map<uint16_t, int> send_fds_;  // by source port
};

}  // namespace softverbs::roce
