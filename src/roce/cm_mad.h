// Communication Management MADs (IBA 13.4 MAD header, 12.6 CM messages) as
// RoCE v2 carries them: UD SEND Only packets to QP1 (the GSI) with Q_Key
// 0x80010000, 256 bytes each. The connection manager's messages on the wire
// (docs/rdmacm.md); rdma_cm's IP header rides in the REQ's and SIDR REQ's
// private data (CmaIpHeader).
//
// Every field is placed by its (byte, bit, width) in the IBA's tables 106
// (REQ), 107 (MRA), 108 (REJ), 110 (REP), 111 (RTU), 112 (DREQ), 113
// (DREP), 118 (SIDR REQ) and 119 (SIDR REP), counted from the start of the
// message data (after the 24-byte MAD header); big-endian, bit 0 the most
// significant bit of its byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace softverbs::roce {

inline constexpr uint32_t kGsiQpn = 1;
// The destination QP of a packet to a multicast group (IBA 10.5.2.2).
inline constexpr uint32_t kMulticastQpn = 0xffffff;
inline constexpr uint32_t kGsiQkey = 0x80010000u;
inline constexpr size_t kMadBytes = 256;
inline constexpr size_t kMadHeaderBytes = 24;
inline constexpr size_t kCmDataBytes = kMadBytes - kMadHeaderBytes;  // 232

inline constexpr uint8_t kMadBaseVersion = 1;
inline constexpr uint8_t kMgmtClassCm = 0x07;
inline constexpr uint8_t kCmClassVersion = 2;
inline constexpr uint8_t kMadMethodSend = 0x03;

// The CM's attribute ids (IBA table 105).
enum class CmAttr : uint16_t {
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
};

// Where a field lies in the message data: byte offset, first bit (0 = the
// byte's most significant) and width in bits (<= 64, within 8 bytes).
struct CmFieldLoc {
  uint16_t byte;
  uint8_t bit;
  uint8_t bits;
};

// The fields of the CM messages rdma_cm uses. Each message carries some of
// them (the tables in cm_mad.cc); the rest are 0 when decoded.
struct CmMad {
  CmAttr attr = CmAttr::kReq;
  uint64_t transaction_id = 0;
  uint32_t local_comm_id = 0;   // SIDR: the request id
  uint32_t remote_comm_id = 0;  // SIDR REP: the request id it answers
  uint64_t service_id = 0;      // REQ, SIDR REQ/REP
  uint64_t local_ca_guid = 0;   // REQ, REP
  uint32_t qkey = 0;            // REQ, REP, SIDR REP
  uint32_t qpn = 0;             // REQ, REP, SIDR REP: the sender's QP; DREQ: the receiver's
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t transport = 0;           // REQ: 0 RC, 1 UC, 3 with an extended type (IBA 12.6.5)
  uint8_t extended_transport = 0;  // REQ: 1 XRC (with transport 3)
  uint8_t flow_control = 0;
  uint32_t starting_psn = 0;
  uint8_t remote_cm_response_timeout = 0;
  uint8_t local_cm_response_timeout = 0;
  uint8_t retry_count = 0;
  uint8_t rnr_retry_count = 0;
  uint8_t max_cm_retries = 0;
  uint8_t srq = 0;
  uint16_t pkey = 0;
  uint8_t path_mtu = 0;  // enum ibv_mtu
  uint16_t local_lid = 0;
  uint16_t remote_lid = 0;
  uint8_t local_gid[16] = {};
  uint8_t remote_gid[16] = {};
  uint32_t flow_label = 0;
  uint8_t packet_rate = 0;
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;
  uint8_t local_ack_timeout = 0;
  uint8_t target_ack_delay = 0;  // REP
  uint8_t message_rejected = 0;  // REJ: 0 REQ, 1 REP, 2 other
  uint16_t reason = 0;           // REJ
  uint8_t status = 0;            // SIDR REP
  uint8_t message_mraed = 0;     // MRA: 0 REQ, 1 REP, 2 LAP (IBA 12.6.6)
  uint8_t service_timeout = 0;   // MRA: the sender answers within 4.096 us * 2^this
  // The message's private data (REQ 92, MRA 222, REP 196, RTU 224, REJ 148, DREQ
  // 220, DREP 224, SIDR REQ 216, SIDR REP 136 bytes).
  uint8_t private_data[224] = {};
};

// Bytes of private data a message of attr carries.
size_t CmPrivateDataBytes(CmAttr attr);

// Writes the 256-byte MAD of m to out. False for an attribute this codec
// does not know (LAP and APR are never sent).
bool EncodeCmMad(const CmMad& m, std::span<uint8_t, kMadBytes> out);

// Reads a MAD; false unless it is a CM Send of a known attribute, class
// version 2, of at least kMadBytes bytes.
bool DecodeCmMad(std::span<const uint8_t> in, CmMad* m);

// rdma_cm's header at the start of a REQ's and SIDR REQ's private data (the
// kernel's struct cma_hdr): version 0, the IP version in the high nibble,
// the active side's port, then its address and the address it connects to
// (IPv4: in the last 4 bytes of each 16). Big-endian.
struct CmaIpHeader {
  uint8_t cma_version;  // 0x00
  uint8_t ip_version;   // 0x40 IPv4, 0x60 IPv6
  uint8_t port_be[2];   // the source port
  uint8_t src_addr[16];
  uint8_t dst_addr[16];
};
static_assert(sizeof(CmaIpHeader) == 36);

// Service ids of RDMA_IP (IBA annex A11): 0x0000000001 PP PPPP, the port
// space in bits 16..23 and the port in the low 16.
inline uint64_t CmaServiceId(uint32_t port_space, uint16_t port) {
  return 0x0000000001000000ull | (static_cast<uint64_t>(port_space & 0xff) << 16) | port;
}

}  // namespace softverbs::roce
