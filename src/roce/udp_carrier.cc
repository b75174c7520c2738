#include "roce/udp_carrier.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
// After netinet/in.h (libc-compat): IPV6_FLOWINFO, which glibc does not define.
#include <linux/in6.h>
#include <linux/udp.h>  // UDP_SEGMENT, UDP_GRO
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "roce/headers.h"
#include "roce/icrc.h"
#include "roce/ip_headers.h"

namespace softverbs::roce {
namespace {

constexpr uint8_t kIpv4MappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

// The largest RoCE packet: 4096-byte MTU payload plus headers.
constexpr size_t kMaxRoceBytes = 4096 + 128;
// The most bytes one UDP datagram (or GSO send, or GRO read) carries.
constexpr size_t kMaxUdpPayload = 65507;
// UDP_MAX_SEGMENTS of Linux before commit 1382e3b6a350 (6.11, and the stable
// kernels of September 2024 on, 5.15 and 6.1 among them).
constexpr size_t kOlderKernelMaxSegments = 64;

uint64_t NowUs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

std::string Errno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// A sockaddr for an address of ends (source or destination) and a port.
socklen_t SockaddrOf(const Endpoints& ends, bool source, uint16_t port, uint32_t scope_id,
                     sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  const uint8_t* addr = source ? ends.src : ends.dst;
  if (ends.ipv6) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(out);
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(port);
    std::memcpy(&sa->sin6_addr, addr, 16);
    if (addr[0] == 0xfe && (addr[1] & 0xc0) == 0x80) sa->sin6_scope_id = scope_id;
    return sizeof(*sa);
  }
  auto* sa = reinterpret_cast<sockaddr_in*>(out);
  sa->sin_family = AF_INET;
  sa->sin_port = htons(port);
  std::memcpy(&sa->sin_addr, addr, 4);
  return sizeof(*sa);
}

// TOS/traffic class, TTL/hop limit and flow label from recvmsg's control
// messages.
void ReadVariantFields(msghdr* msg, Endpoints* ends) {
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
    const uint8_t* data = CMSG_DATA(c);
    int value = 0;
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      ends->traffic_class = data[0];
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
      std::memcpy(&value, data, sizeof(value));
      ends->hop_limit = static_cast<uint8_t>(value);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
      std::memcpy(&value, data, sizeof(value));
      ends->traffic_class = static_cast<uint8_t>(value);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT) {
      std::memcpy(&value, data, sizeof(value));
      ends->hop_limit = static_cast<uint8_t>(value);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_FLOWINFO) {
      uint32_t flowinfo;  // traffic class and flow label, network order
      std::memcpy(&flowinfo, data, sizeof(flowinfo));
      ends->flow_label = ntohl(flowinfo) & 0xfffff;
    }
  }
}

}  // namespace

bool GidIsIpv4(const uint8_t gid[16]) {
  return std::memcmp(gid, kIpv4MappedPrefix, sizeof(kIpv4MappedPrefix)) == 0;
}

void SetAddressFromGid(const uint8_t gid[16], bool source, Endpoints* ends) {
  uint8_t* addr = source ? ends->src : ends->dst;
  std::memset(addr, 0, 16);
  ends->ipv6 = !GidIsIpv4(gid);
  if (ends->ipv6) {
    std::memcpy(addr, gid, 16);
  } else {
    std::memcpy(addr, gid + 12, 4);
  }
}

void GidOfAddress(const Endpoints& ends, bool source, uint8_t gid[16]) {
  const uint8_t* addr = source ? ends.src : ends.dst;
  std::memset(gid, 0, 16);
  if (ends.ipv6) {
    std::memcpy(gid, addr, 16);
  } else {
    gid[10] = gid[11] = 0xff;
    std::memcpy(gid + 12, addr, 4);
  }
}

UdpCarrier::~UdpCarrier() {
  if (recv_fd_ >= 0) close(recv_fd_);
  for (const auto& [port, socket] : send_fds_) close(socket.first);
}

int UdpCarrier::SendSocket(uint16_t src_port, uint16_t* bound, std::string* error) {
  if (auto it = send_fds_.find(src_port); it != send_fds_.end()) {
    *bound = it->second.second;
    return it->second.first;
  }
  if (send_fds_.size() >= kMaxSendSockets) CloseOldestSendSocket();
  const int family = local_.ipv6 ? AF_INET6 : AF_INET;
  const int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = Errno("socket");
    return -1;
  }
  // DF on every packet and no fragmentation: the IPv4 ID is then 0 on an
  // unconnected socket, which the ICRC covers.
  // Packets to a multicast group leave through this address's interface
  // (the kernel loops them back to this host's members' sockets too).
  if (!local_.ipv6) {
    const int pmtu = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
    in_addr self;
    std::memcpy(&self, local_.src + 12, 4);
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &self, sizeof(self));
  } else {
    const int pmtu = IPV6_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu));
    const unsigned ifindex = scope_id_;
    if (ifindex) setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex, sizeof(ifindex));
  }
  sockaddr_storage sa;
  socklen_t len = SockaddrOf(local_, /*source=*/true, src_port, scope_id_, &sa);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    // Someone else has the flow port: any port will do.
    len = SockaddrOf(local_, /*source=*/true, 0, scope_id_, &sa);
    if (errno != EADDRINUSE || bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      *error = Errno("bind of the flow source port");
      close(fd);
      return -1;
    }
  }
  *bound = ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
  send_fds_[src_port] = {fd, *bound};
  send_fd_order_.push_back(src_port);
  return fd;
}

void UdpCarrier::CloseOldestSendSocket() {
  // The run and the held packets name their routes by index: they go now,
  // before a route's slot can be given to another.
  FlushSends();
  FlushFaults();
  const uint16_t port = send_fd_order_.front();
  send_fd_order_.pop_front();
  auto socket = send_fds_.find(port);
  close(socket->second.first);
  send_fds_.erase(socket);
  for (auto it = route_index_.lower_bound({port, {}, 0, 0});
       it != route_index_.end() && std::get<0>(it->first) == port;) {
    routes_[it->second].fd = -1;
    free_routes_.push_back(it->second);
    it = route_index_.erase(it);
  }
  counters_.send_sockets_closed++;
}

bool UdpCarrier::Open(const uint8_t gid[16], uint32_t scope_id, std::string* error) {
  if (recv_fd_ >= 0) {
    *error = "the carrier is already open";
    return false;
  }
  FaultConfig faults;
  if (!FaultConfigFromEnvironment(&faults, error)) return false;
  if (faults.Any()) injector_ = std::make_unique<FaultInjector>(faults);
  local_ = Endpoints{};
  SetAddressFromGid(gid, /*source=*/true, &local_);
  scope_id_ = scope_id;
  recv_fd_ = socket(local_.ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (recv_fd_ < 0) {
    *error = Errno("socket");
    return false;
  }
  // The variant IP fields of each packet come as control messages: a UD
  // receive buffer's GRH holds the real IP header.
  const int on = 1;
  if (local_.ipv6) {
    setsockopt(recv_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
    setsockopt(recv_fd_, IPPROTO_IPV6, IPV6_RECVTCLASS, &on, sizeof(on));
    setsockopt(recv_fd_, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &on, sizeof(on));
    setsockopt(recv_fd_, IPPROTO_IPV6, IPV6_FLOWINFO, &on, sizeof(on));
    // rxe sends RoCE over IPv6 with a zero UDP checksum (its ICRC covers
    // the packet; RFC 6936 allows zero for such protocols), which Linux
    // drops for a socket that has not said it takes them.
    setsockopt(recv_fd_, IPPROTO_UDP, UDP_NO_CHECK6_RX, &on, sizeof(on));
  } else {
    setsockopt(recv_fd_, IPPROTO_IP, IP_RECVTOS, &on, sizeof(on));
    setsockopt(recv_fd_, IPPROTO_IP, IP_RECVTTL, &on, sizeof(on));
  }
  // Runs of packets of one flow come in one read (GRO), cut into packets
  // here; without it (kernels before 5.0) one read is one packet.
  setsockopt(recv_fd_, IPPROTO_UDP, UDP_GRO, &on, sizeof(on));
  // Room for every sender's window (wire_requester.cc kWindowPackets) at
  // once; the kernel caps it at net.core.rmem_max (4 MiB on Debian 12).
  const int rcvbuf = 8 << 20;
  setsockopt(recv_fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_storage sa;
  const socklen_t len = SockaddrOf(local_, /*source=*/true, kRoceV2Port, scope_id, &sa);
  if (bind(recv_fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    *error = Errno("bind of UDP 4791");
    return false;
  }
  return true;
}

int64_t UdpCarrier::RouteTo(const Endpoints& ends, std::string* error) {
  std::array<uint8_t, 16> dst;
  std::memcpy(dst.data(), ends.dst, 16);
  const RouteKey key{ends.src_port, dst, ends.traffic_class, ends.hop_limit};
  if (auto it = route_index_.find(key); it != route_index_.end()) {
    return static_cast<int64_t>(it->second);
  }
  uint16_t bound = 0;
  const int fd = SendSocket(ends.src_port, &bound, error);
  if (fd < 0) return -1;
  Route route{fd, bound, {}, 0, {ends.traffic_class, ends.hop_limit}};
  route.to_len = SockaddrOf(ends, /*source=*/false, kRoceV2Port, scope_id_, &route.to);
  size_t slot = routes_.size();
  if (free_routes_.empty()) {
    routes_.push_back(route);
  } else {
    slot = free_routes_.back();
    free_routes_.pop_back();
    routes_[slot] = route;
  }
  route_index_[key] = slot;
  return static_cast<int64_t>(slot);
}

bool UdpCarrier::TransmitRun(std::string* error) {
  SendRun& run = run_;
  if (run.count == 0) return true;
  const Route& r = routes_[static_cast<size_t>(run.route)];
  bool ok = true;
  if (run.count == 1 || !gso_) {
    for (size_t off = 0, i = 0; i < run.count; ++i) {
      const size_t len = std::min(run.segment, run.used - off);
      ok = Transmit(std::span(run.bytes.get() + off, len), static_cast<uint64_t>(run.route),
                    error) &&
           ok;
      off += len;
    }
  } else {
    iovec iov{run.bytes.get(), run.used};
    alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(uint16_t)) + kPathControlBytes] = {};
    msghdr msg = MessageTo(r, &iov, control);
    auto* c = reinterpret_cast<cmsghdr*>(control);
    c->cmsg_level = IPPROTO_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    const uint16_t segment = static_cast<uint16_t>(run.segment);
    std::memcpy(CMSG_DATA(c), &segment, sizeof(segment));
    msg.msg_controllen =
        CMSG_SPACE(sizeof(uint16_t)) + WritePathControl(r, control + CMSG_SPACE(sizeof(uint16_t)));
    const ssize_t n = sendmsg(r.fd, &msg, 0);
    if (n == static_cast<ssize_t>(run.used)) {
      counters_.sent += run.count;
      counters_.gso_sends++;
    } else if (errno == EINVAL && run.count > kOlderKernelMaxSegments &&
               max_segments_ > kOlderKernelMaxSegments) {
      // An older kernel takes at most 64 segments a send.
      max_segments_ = kOlderKernelMaxSegments;
      return TransmitRunInTwo(error);
    } else if (errno == EINVAL || errno == EIO || errno == ENOPROTOOPT || errno == EOPNOTSUPP) {
      // No UDP GSO on this path (an old kernel, a device without checksum
      // offload): one datagram a packet from now on. The IDs the ICRCs were
      // made for are the segments' (0, 1, ...), which the receiver accepts.
      gso_ = false;
      return TransmitRun(error);
    } else {
      if (error) *error = Errno("sendmsg (UDP GSO)");
      counters_.send_errors += run.count;
      ok = false;
    }
  }
  run.count = 0;
  run.used = 0;
  return ok;
}

bool UdpCarrier::TransmitRunInTwo(std::string* error) {
  SendRun& run = run_;
  const size_t first_count = max_segments_;
  const size_t first_bytes = first_count * run.segment;
  const size_t rest_count = run.count - first_count;
  const size_t rest_bytes = run.used - first_bytes;
  run.count = first_count;
  run.used = first_bytes;
  const bool ok = TransmitRun(error);  // sends, and empties the run
  // The rest starts the next send: its packets leave with IDs 0, 1, ...
  // again, for which their ICRCs are made anew.
  std::memmove(run.bytes.get(), run.bytes.get() + first_bytes, rest_bytes);
  if (!local_.ipv6) {
    RenumberIpv4Run(run.bytes.get(), rest_bytes, run.segment, static_cast<uint16_t>(first_count));
  }
  run.count = rest_count;
  run.used = rest_bytes;
  return TransmitRun(error) && ok;
}

void UdpCarrier::FlushSends() {
  TransmitRun(nullptr);
}

msghdr UdpCarrier::MessageTo(const Route& r, iovec* iov, uint8_t* control) {
  msghdr msg{};
  msg.msg_name = const_cast<sockaddr_storage*>(&r.to);
  msg.msg_namelen = r.to_len;
  msg.msg_iov = iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  return msg;
}

size_t UdpCarrier::WritePathControl(const Route& r, uint8_t* control) const {
  const bool ipv6 = r.to.ss_family == AF_INET6;
  const int values[2] = {r.path.traffic_class, r.path.hop_limit};
  const int types[2] = {ipv6 ? IPV6_TCLASS : IP_TOS, ipv6 ? IPV6_HOPLIMIT : IP_TTL};
  for (int i = 0; i < 2; ++i) {
    auto* c = reinterpret_cast<cmsghdr*>(control + i * CMSG_SPACE(sizeof(int)));
    c->cmsg_level = ipv6 ? IPPROTO_IPV6 : IPPROTO_IP;
    c->cmsg_type = types[i];
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &values[i], sizeof(int));
  }
  return kPathControlBytes;
}

bool UdpCarrier::Transmit(std::span<const uint8_t> roce, uint64_t route, std::string* error) {
  const Route& r = routes_[route];
  iovec iov{const_cast<uint8_t*>(roce.data()), roce.size()};
  alignas(cmsghdr) uint8_t control[kPathControlBytes] = {};
  msghdr msg = MessageTo(r, &iov, control);
  msg.msg_controllen = WritePathControl(r, control);
  const ssize_t n = sendmsg(r.fd, &msg, 0);
  if (n != static_cast<ssize_t>(roce.size())) {
    if (error) *error = Errno("sendto");
    ++counters_.send_errors;
    return false;
  }
  ++counters_.sent;
  return true;
}

bool UdpCarrier::Send(const uint8_t dst_gid[16], uint16_t src_port, const PathIpFields& path,
                      const TransportFields& fields, std::span<const uint8_t> payload,
                      std::string* error) {
  if (GidIsIpv4(dst_gid) == local_.ipv6) {
    *error = "destination GID and local GID are of different IP versions";
    return false;
  }
  Endpoints ends = local_;
  SetAddressFromGid(dst_gid, /*source=*/false, &ends);
  ends.src_port = src_port;
  ends.dst_port = kRoceV2Port;
  ends.traffic_class = path.traffic_class;
  ends.hop_limit = path.hop_limit;
  const int64_t route = RouteTo(ends, error);
  if (route < 0) return false;
  ends.src_port = routes_[static_cast<size_t>(route)].src_port;
  // The transport part and its ICRC over the IP/UDP headers the kernel
  // will write; the kernel fills the IP and UDP checksums itself.
  const size_t head = IpUdpBytes(ends.ipv6);
  WireError wire;
  if (!injector_ && gso_) {
    // Packets of one route go out in runs (one GSO send, FlushSends): a run
    // ends at another route, a longer packet, a shorter one (which may end
    // it), max_segments_ packets or 64 KiB. Segment k of a run leaves with
    // IPv4 ID k, and its ICRC is made for that ID. The packet is built at
    // the run's end, where it is sent from.
    SendRun& run = run_;
    // Room for a whole run and one packet more (built, then found not to
    // fit).
    if (!run.bytes) {
      run.bytes = std::make_unique_for_overwrite<uint8_t[]>(kMaxUdpPayload + kMaxRoceBytes);
    }
    if (run.count > 0 && (run.route != route || run.closed || run.count == max_segments_)) {
      TransmitRun(nullptr);
    }
    uint8_t* at = run.bytes.get() + run.used;
    const size_t transport =
        BuildTransport(fields, payload, std::span(at, kMaxRoceBytes - kIcrcBytes), &wire);
    if (transport == 0) {
      *error = std::string("cannot build the packet: ") + WireErrorName(wire);
      return false;
    }
    const size_t size = transport + kIcrcBytes;
    if (run.count > 0 && (size > run.segment || run.used + size > kMaxUdpPayload)) {
      // Longer than the run's segments, or past 64 KiB: the run goes
      // without it, and it starts the next one.
      TransmitRun(nullptr);
      std::memmove(run.bytes.get(), at, transport);
      at = run.bytes.get();
    }
    if (run.count == 0) {
      run.route = route;
      run.segment = size;
      run.closed = false;
    }
    uint8_t ip_udp[48];
    WriteIpUdp(ends, size, ip_udp);
    uint32_t icrc = ComputeIcrc(std::span(ip_udp, head), std::span(at, transport));
    if (!ends.ipv6) icrc ^= Ipv4IdIcrcDelta(static_cast<uint16_t>(run.count), transport);
    StoreIcrc(icrc, at + transport);
    run.used += size;
    run.closed = size < run.segment;
    run.count++;
    return true;
  }
  uint8_t buf[48 + kMaxRoceBytes];
  const size_t transport = BuildTransport(
      fields, payload, std::span(buf + head, sizeof(buf) - head - kIcrcBytes), &wire);
  if (transport == 0) {
    *error = std::string("cannot build the packet: ") + WireErrorName(wire);
    return false;
  }
  const size_t size = transport + kIcrcBytes;
  WriteIpUdp(ends, size, buf);
  StoreIcrc(ComputeIcrc(std::span(buf, head), std::span(buf + head, transport)),
            buf + head + transport);
  const std::span<const uint8_t> roce(buf + head, size);
  if (!injector_) return Transmit(roce, static_cast<uint64_t>(route), error);
  injector_->Submit(std::vector<uint8_t>(roce.begin(), roce.end()), static_cast<uint64_t>(route),
                    NowUs(),
                    [this](std::span<const uint8_t> p, uint64_t r) { Transmit(p, r, nullptr); });
  return true;
}

uint64_t UdpCarrier::PollFaults() {
  if (!injector_) return UINT64_MAX;
  return injector_->Poll(
      NowUs(), [this](std::span<const uint8_t> p, uint64_t r) { Transmit(p, r, nullptr); });
}

void UdpCarrier::FlushFaults() {
  if (!injector_) return;
  injector_->Flush([this](std::span<const uint8_t> p, uint64_t r) { Transmit(p, r, nullptr); });
}

bool UdpCarrier::ReadDatagram(std::string* error) {
  ReadRun& run = read_;
  run.bytes.resize(kMaxUdpPayload + 1);
  sockaddr_storage from;
  iovec iov{run.bytes.data(), run.bytes.size()};
  alignas(cmsghdr) uint8_t control[256];
  msghdr msg{};
  msg.msg_name = &from;
  msg.msg_namelen = sizeof(from);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(recv_fd_, &msg, MSG_TRUNC);
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK) *error = Errno("recvmsg");
    return false;
  }
  run.length = static_cast<size_t>(n);
  run.offset = 0;
  run.segment = run.length;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
      int segment = 0;
      std::memcpy(&segment, CMSG_DATA(c), sizeof(segment));
      if (segment > 0) run.segment = static_cast<size_t>(segment);
    }
  }
  if (run.length > kMaxUdpPayload) run.segment = run.length;  // truncated: refused whole
  // The IP and UDP headers as they were, for the ICRC and the GRH:
  // addresses and ports from the socket, lengths from the datagram, the
  // variant fields from the control messages (the ICRC masks them).
  Endpoints& ends = run.ends;
  ends = Endpoints{};
  ends.ipv6 = local_.ipv6;
  std::memcpy(ends.dst, local_.src, 16);
  if (from.ss_family == AF_INET6) {
    const auto* sa = reinterpret_cast<const sockaddr_in6*>(&from);
    std::memcpy(ends.src, &sa->sin6_addr, 16);
    ends.src_port = ntohs(sa->sin6_port);
  } else {
    const auto* sa = reinterpret_cast<const sockaddr_in*>(&from);
    std::memcpy(ends.src, &sa->sin_addr, 4);
    ends.src_port = ntohs(sa->sin_port);
  }
  ends.dst_port = kRoceV2Port;
  ReadVariantFields(&msg, &ends);
  return true;
}

bool UdpCarrier::Receive(ReceivedPacket* out, WireError* verdict, std::string* error) {
  ReadRun& run = read_;
  if (run.offset >= run.length && !ReadDatagram(error)) return false;
  // The next packet of the read: GRO joined a run of one flow's datagrams
  // of `segment` bytes (the last may be shorter).
  const size_t size = std::min(run.segment, run.length - run.offset);
  const size_t at = run.offset;
  run.offset += size;
  out->ends = run.ends;
  if (size > kMaxRoceBytes) {
    out->bytes.clear();
    *verdict = WireError::kBadLength;  // larger than any RoCE packet
    ++counters_.refused[static_cast<size_t>(*verdict)];
    return true;
  }
  out->bytes.assign(run.bytes.begin() + static_cast<ptrdiff_t>(at),
                    run.bytes.begin() + static_cast<ptrdiff_t>(at + size));
  uint8_t ip_udp[48];
  WriteIpUdp(out->ends, out->bytes.size(), ip_udp);
  *verdict = ParseRoce(std::span(ip_udp, IpUdpBytes(out->ends.ipv6)), out->bytes, &out->fields,
                       &out->payload, &out->ends.ipv4_id, &other_ids_);
  if (*verdict == WireError::kOk) {
    ++counters_.received;
    if (out->ends.ipv4_id >= kIcrcIpv4Ids) ++counters_.other_ipv4_ids;
  } else {
    ++counters_.refused[static_cast<size_t>(*verdict)];
  }
  return true;
}

}  // namespace softverbs::roce
