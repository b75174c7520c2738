// A skeleton of the RoCEv2 packet carrier over UDP sockets: no root needed
// (port 4791 is not privileged). It receives on UDP 4791 of one GID's
// address and sends each QP's packets from that QP's flow source port
// (flow.h) on the same address, so the packets on the wire are the ones a
// kernel rxe or a RoCE NIC sends: the kernel writes the IP and UDP headers,
// the carrier the transport part and an ICRC over the headers the kernel
// will write (IPv4: DF set and, on an unconnected socket with DF, ID 0 -
// Linux's ip_select_ident - as rxe sends; the variant fields are masked).
// With SOFTVERBS_ROCE_FAULTS set (fault_config.h) every packet it sends goes
// through the fault injector first. Not yet under the transport engine.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "roce/fault_injector.h"
#include "roce/icrc.h"
#include "roce/ipv4_id_history.h"
#include "roce/packet.h"

namespace softverbs::roce {

// A GID as an address: IPv4-mapped GIDs (::ffff:a.b.c.d) are IPv4.
bool GidIsIpv4(const uint8_t gid[16]);
// Fills ends->src or ->dst (and ipv6) from a GID.
void SetAddressFromGid(const uint8_t gid[16], bool source, Endpoints* ends);
// The GID of ends->src or ->dst (IPv4: ::ffff:a.b.c.d).
void GidOfAddress(const Endpoints& ends, bool source, uint8_t gid[16]);

struct ReceivedPacket {
  // As the packet came: addresses, ports, TOS/traffic class, TTL/hop limit
  // and IPv6 flow label from the socket (IP_RECVTOS, IP_RECVTTL,
  // IPV6_RECVTCLASS, IPV6_RECVHOPLIMIT, IPV6_FLOWINFO), so WriteGrh
  // (packet.h) gives the GRH of the real IP header.
  Endpoints ends;
  TransportFields fields;            // its headers
  std::vector<uint8_t> bytes;        // the UDP payload: BTH up to the ICRC
  std::span<const uint8_t> payload;  // inside bytes, without pad (not valid in a copy)
};

// What the carrier did (the transport counters of `softverbs status` will
// come from here).
struct CarrierCounters {
  uint64_t sent = 0;         // packets handed to the kernel
  uint64_t gso_sends = 0;    // runs of packets sent as one UDP GSO send
  uint64_t send_errors = 0;  // sendto failures of packets released by the fault injector
  // flow sockets closed to stay within kMaxSendSockets (their flows get a
  // new one at their next packet)
  uint64_t send_sockets_closed = 0;
  uint64_t received = 0;  // packets accepted by the parser
  // of which made (ICRC) for an IPv4 ID other than softverbs' 0..127: rxe's,
  // a NIC's (ipv4_id_history.h)
  uint64_t other_ipv4_ids = 0;
  uint64_t refused[kWireErrorCount] = {};  // packets refused, by reason (kBadIcrc: ICRC errors)
};

class UdpCarrier {
 public:
  // Flow sockets (one per source port in use, made on first use) a carrier
  // keeps open at most: past it, the oldest is closed - the run being
  // gathered and the packets the fault injector holds are sent first - and
  // its routes forgotten. Flows come from QP numbers (16,384 ports), so a
  // long-lived daemon whose QPs come and go would otherwise hold up to
  // 16,384 sockets.
  static constexpr size_t kMaxSendSockets = 1024;

  UdpCarrier() = default;
  ~UdpCarrier();
  UdpCarrier(const UdpCarrier&) = delete;
  UdpCarrier& operator=(const UdpCarrier&) = delete;

  // Binds UDP 4791 on the GID's address; scope_id is the interface index
  // (needed for link-local IPv6 GIDs); reads SOFTVERBS_ROCE_FAULTS. False
  // with *error (a bad SOFTVERBS_ROCE_FAULTS included).
  bool Open(const uint8_t gid[16], uint32_t scope_id, std::string* error);

  // The receive socket (non-blocking), for poll/epoll.
  int fd() const { return recv_fd_; }

  // Sends one packet to dst_gid from the flow source port src_port (a
  // socket bound to it is made on first use; if another socket of the host
  // holds that port, one the kernel picks), through the fault injector when
  // faults are set. False with *error. Without faults, packets of one
  // route are gathered into a run that leaves as one UDP GSO send (UDP
  // segmentation offload: one system call, cut into datagrams by the
  // kernel or the NIC) when the next packet cannot join it or at
  // FlushSends - which the caller calls when it has sent what it had.
  // The packet's IP header gets path's traffic class (IPv4 TOS) and hop
  // limit (TTL), given to the kernel with each send (IP_TOS and IP_TTL,
  // IPV6_TCLASS and IPV6_HOPLIMIT control messages).
  bool Send(const uint8_t dst_gid[16], uint16_t src_port, const PathIpFields& path,
            const TransportFields& fields, std::span<const uint8_t> payload, std::string* error);

  // Takes one packet from the receive socket. kOk: *out holds it; any
  // other WireError: a packet arrived and was refused for that reason;
  // false: nothing to read (or a socket error, in *error).
  bool Receive(ReceivedPacket* out, WireError* verdict, std::string* error);
  // Whether packets of the last read are still to be taken (Receive does
  // not read the socket again before they are).
  bool HasReadPending() const { return read_.offset < read_.length; }

  // Sends the run of packets gathered by Send.
  void FlushSends();

  // Sends the packets the fault injector held whose time came; returns the
  // steady-clock microsecond when the next is due (UINT64_MAX: none).
  uint64_t PollFaults();
  // Sends everything the fault injector still holds.
  void FlushFaults();

  const CarrierCounters& counters() const { return counters_; }
  // Null without faults.
  const FaultInjector* faults() const { return injector_.get(); }

 private:
  // Where a packet goes: the socket of its source port, its destination and
  // the IP header fields of its path.
  struct Route {
    int fd;
    uint16_t src_port;  // the port its socket has (see SendSocket)
    sockaddr_storage to;
    socklen_t to_len;
    PathIpFields path;
  };
  // Routes by (flow port, destination, traffic class, hop limit).
  using RouteKey = std::tuple<uint16_t, std::array<uint8_t, 16>, uint8_t, uint8_t>;
  // The control messages that give the kernel a route's path fields (two
  // ints); returns the bytes written to control (kPathControlBytes).
  static constexpr size_t kPathControlBytes = 2 * CMSG_SPACE(sizeof(int));
  size_t WritePathControl(const Route& r, uint8_t* control) const;
  // A message of *iov to the route's destination, with control as its
  // control buffer (the caller sets msg_controllen).
  static msghdr MessageTo(const Route& r, iovec* iov, uint8_t* control);
  // The socket sending from flow port src_port, made on first use. If
  // another socket holds that port, the kernel picks one (*bound says
  // which): the port is only flow entropy, the ICRC covers whichever goes.
  int SendSocket(uint16_t src_port, uint16_t* bound, std::string* error);
  // Closes the oldest flow socket and forgets its routes (their slots in
  // routes_ are reused), after sending what refers to routes by index.
  void CloseOldestSendSocket();
  // The index of the route (made on first use), or -1 with *error.
  int64_t RouteTo(const Endpoints& ends, std::string* error);
  bool Transmit(std::span<const uint8_t> roce, uint64_t route, std::string* error);
  // Packets of one route waiting to go as one GSO send: all of `segment`
  // bytes but the last, which may be shorter (and closes the run).
  struct SendRun {
    int64_t route = -1;
    size_t segment = 0;
    size_t count = 0;
    bool closed = false;
    // The packets back to back (BTH up to the ICRC), built in place; the
    // first `used` bytes hold the run's packets.
    std::unique_ptr<uint8_t[]> bytes;
    size_t used = 0;
  };
  bool TransmitRun(std::string* error);
  // The run as two GSO sends, the first of max_segments_ (an older kernel
  // refused it whole).
  bool TransmitRunInTwo(std::string* error);
  // What one read of the receive socket gave: with UDP_GRO, a run of one
  // flow's datagrams of `segment` bytes each (the last may be shorter).
  Ipv4IdHistory other_ids_;  // the IPv4 IDs of the sources that number their own
  struct ReadRun {
    std::vector<uint8_t> bytes;
    size_t length = 0;  // bytes read
    size_t offset = 0;  // where the next packet starts
    size_t segment = 0;
    Endpoints ends;  // addresses, ports and variant fields of every packet in it
  };
  // Reads the next datagram (or GRO run) into read_; false when there is none.
  bool ReadDatagram(std::string* error);

  Endpoints local_;  // our address, in src
  uint32_t scope_id_ = 0;
  int recv_fd_ = -1;
  std::map<uint16_t, std::pair<int, uint16_t>> send_fds_;  // flow port -> socket, bound port
  std::deque<uint16_t> send_fd_order_;  // flow ports of send_fds_, oldest socket first
  std::vector<Route> routes_;
  std::vector<size_t> free_routes_;  // slots of routes_ whose socket was closed
  std::map<RouteKey, size_t> route_index_;
  std::unique_ptr<FaultInjector> injector_;
  CarrierCounters counters_;
  SendRun run_;
  ReadRun read_;
  bool gso_ = true;  // until the kernel refuses a GSO send
  // Segments a GSO send may have: kIcrcIpv4Ids until the kernel refuses a
  // run of more than its older UDP_MAX_SEGMENTS (64).
  size_t max_segments_ = kIcrcIpv4Ids;
};

}  // namespace softverbs::roce
