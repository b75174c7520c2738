// The RoCEv2 packet builder and parser (src/roce): every opcode of the
// opcode table round-trips over IPv4 and IPv6, the bytes match a packet
// built by an independent implementation (scapy), and malformed packets are
// refused with their named reason.
#include "roce/packet.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "datapath/ibta_opcode.h"
#include "roce/flow.h"
#include "roce/headers.h"
#include "roce/icrc.h"
#include "roce/ip_headers.h"
#include "roce/ipv4_id_history.h"

namespace softverbs::roce {
namespace {
namespace dp = softverbs::datapath;

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

Endpoints V4() {
  Endpoints e;
  const uint8_t a[4] = {198, 51, 100, 1}, b[4] = {198, 51, 100, 2};
  std::memcpy(e.src, a, 4);
  std::memcpy(e.dst, b, 4);
  e.src_port = 0xc123;
  return e;
}

Endpoints V6() {
  Endpoints e;
  e.ipv6 = true;
  e.src[0] = e.dst[0] = 0xfe;
  e.src[1] = e.dst[1] = 0x80;
  e.src[15] = 1;
  e.dst[15] = 2;
  e.src_port = SourcePortOfQpn(0x11);
  e.flow_label = 0x12345;
  e.traffic_class = 0x28;
  return e;
}

// Every field set to something distinct, so a header read from the wrong
// offset shows.
TransportFields AllFields(uint8_t opcode) {
  TransportFields f;
  f.opcode = opcode;
  f.solicited = true;
  f.ack_req = true;
  f.becn = true;
  f.pkey = 0x8001;
  f.dest_qp = 0xabcdef;
  f.psn = 0x123456;
  f.xrc_srq = 0x0a0b0c;
  f.qkey = 0x11111111;
  f.src_qp = 0x222222;
  f.va = 0x1122334455667788;
  f.rkey = 0x99aabbcc;
  f.dma_len = 0x10000;
  f.swap_add = 0x0102030405060708;
  f.compare = 0x8070605040302010;
  f.syndrome = kAethNak | 2;
  f.msn = 0x777777;
  f.atomic_orig = 0xfeedfacecafebeef;
  f.imm = 0xdeadbeef;
  f.invalidate_rkey = 0x5a5a5a5a;
  return f;
}

// The valid opcodes: every operation of the table on every transport it has.
std::vector<uint8_t> AllOpcodes() {
  std::vector<uint8_t> out;
  for (int op = 0; op < 256; ++op) {
    if (dp::IbtaOpcodeValid(static_cast<uint8_t>(op))) out.push_back(static_cast<uint8_t>(op));
  }
  return out;
}

TEST(RocePacket, TableCoversTheTransports) {
  // RC 24 operations (no RESYNC, no FLUSH; ATOMIC WRITE), UC 12, UD 2, XRC
  // as RC: 62.
  EXPECT_EQ(AllOpcodes().size(), 24u + 12u + 2u + 24u);
  EXPECT_TRUE(dp::IbtaOpcodeValid(0x1d));   // RC ATOMIC_WRITE (IBA 1.5)
  EXPECT_TRUE(dp::IbtaOpcodeValid(0xbd));   // XRC ATOMIC_WRITE
  EXPECT_FALSE(dp::IbtaOpcodeValid(0x3d));  // UC ATOMIC_WRITE: no such thing
  EXPECT_FALSE(dp::IbtaOpcodeValid(0x1c));  // RC FLUSH: not spoken
  EXPECT_FALSE(dp::IbtaOpcodeValid(0x18));  // reserved
  EXPECT_TRUE(dp::IbtaOpcodeValid(0x64));   // UD SEND_ONLY
  EXPECT_FALSE(dp::IbtaOpcodeValid(0x60));  // UD SEND_FIRST
  EXPECT_FALSE(dp::IbtaOpcodeValid(0x2c));  // UC RDMA_READ_REQUEST
  EXPECT_FALSE(dp::IbtaOpcodeValid(0x15));  // RESYNC: RD only
  EXPECT_FALSE(dp::IbtaOpcodeValid(0x44));  // RD
  EXPECT_FALSE(dp::IbtaOpcodeValid(0x81));  // CNP
}

TEST(RocePacket, HeaderSizesFollowTheTable) {
  EXPECT_EQ(TransportHeaderBytes(0x04), 12u);           // RC SEND_ONLY
  EXPECT_EQ(TransportHeaderBytes(0x0b), 12u + 16 + 4);  // RC WRITE_ONLY_WITH_IMM
  EXPECT_EQ(TransportHeaderBytes(0x12), 12u + 4 + 8);   // RC ATOMIC_ACKNOWLEDGE
  EXPECT_EQ(TransportHeaderBytes(0x13), 12u + 28);      // RC COMPARE_SWAP
  EXPECT_EQ(TransportHeaderBytes(0x65), 12u + 8 + 4);   // UD SEND_ONLY_WITH_IMM
  EXPECT_EQ(TransportHeaderBytes(0xac), 12u + 4 + 16);  // XRC READ_REQUEST
  EXPECT_EQ(TransportHeaderBytes(0xb0), 12u + 4);       // XRC READ_RESPONSE_ONLY: no XRCETH
  EXPECT_EQ(TransportHeaderBytes(0x17), 12u + 4);       // RC SEND_ONLY_WITH_INVALIDATE
  EXPECT_EQ(TransportHeaderBytes(0x15), 0u);
  EXPECT_EQ(TransportHeaderBytes(0x1d), 12u + 16);      // RC ATOMIC_WRITE: RETH
  EXPECT_EQ(TransportHeaderBytes(0xbd), 12u + 4 + 16);  // XRC ATOMIC_WRITE: XRCETH, RETH
}

TEST(RocePacket, RoundTripOfEveryOpcode) {
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5, 6, 7};  // 7 bytes: one byte of pad
  for (bool ipv6 : {false, true}) {
    for (uint8_t opcode : AllOpcodes()) {
      const auto& row = dp::IbtaOperationRow(dp::OperationOfOpcode(opcode));
      const TransportFields in = AllFields(opcode);
      const std::span<const uint8_t> body =
          row.payload ? std::span<const uint8_t>(payload) : std::span<const uint8_t>();
      std::vector<uint8_t> buf(256);
      WireError error;
      const size_t len = BuildPacket(ipv6 ? V6() : V4(), in, body, buf, &error);
      ASSERT_NE(len, 0u) << int(opcode) << ": " << WireErrorName(error);
      EXPECT_EQ(len, IpUdpBytes(ipv6) + TransportHeaderBytes(opcode) + body.size() +
                         PadBytes(body.size()) + kIcrcBytes);
      ParsedPacket out;
      ASSERT_EQ(ParsePacket(std::span(buf).first(len), &out), WireError::kOk)
          << row.name << " opcode " << int(opcode);
      const TransportFields& f = out.fields;
      EXPECT_EQ(f.opcode, opcode);
      EXPECT_TRUE(f.solicited && f.ack_req && f.becn && !f.fecn && !f.migreq);
      EXPECT_EQ(f.pkey, in.pkey);
      EXPECT_EQ(f.dest_qp, in.dest_qp);
      EXPECT_EQ(f.psn, in.psn);
      EXPECT_EQ(f.xrc_srq, CarriesXrcEth(opcode) ? in.xrc_srq : 0u) << row.name;
      EXPECT_EQ(f.qkey, CarriesDeth(opcode) ? in.qkey : 0u);
      EXPECT_EQ(f.src_qp, CarriesDeth(opcode) ? in.src_qp : 0u);
      const bool reth = row.headers & dp::kHeaderReth, atomic = row.headers & dp::kHeaderAtomicEth;
      EXPECT_EQ(f.va, reth || atomic ? in.va : 0u) << row.name;
      EXPECT_EQ(f.rkey, reth || atomic ? in.rkey : 0u);
      EXPECT_EQ(f.dma_len, reth ? in.dma_len : 0u);
      EXPECT_EQ(f.swap_add, atomic ? in.swap_add : 0u);
      EXPECT_EQ(f.compare, atomic ? in.compare : 0u);
      const bool aeth = row.headers & dp::kHeaderAeth;
      EXPECT_EQ(f.syndrome, aeth ? in.syndrome : 0u);
      EXPECT_EQ(f.msn, aeth ? in.msn : 0u);
      EXPECT_EQ(f.atomic_orig, row.headers & dp::kHeaderAtomicAckEth ? in.atomic_orig : 0u);
      EXPECT_EQ(f.imm, row.headers & dp::kHeaderImmDt ? in.imm : 0u);
      EXPECT_EQ(f.invalidate_rkey, row.headers & dp::kHeaderIeth ? in.invalidate_rkey : 0u);
      EXPECT_EQ(std::vector<uint8_t>(out.payload.begin(), out.payload.end()),
                std::vector<uint8_t>(body.begin(), body.end()));
      EXPECT_EQ(out.ends.ipv6, ipv6);
      EXPECT_EQ(out.ends.src_port, (ipv6 ? V6() : V4()).src_port);
      EXPECT_EQ(out.ends.dst_port, kRoceV2Port);
      if (ipv6) {
        EXPECT_EQ(out.ends.flow_label, 0x12345u);
        EXPECT_EQ(out.ends.traffic_class, 0x28);
      }
    }
  }
}

// Built by scapy 2.5 (IP(ttl=64, flags=DF, id=0)/UDP(sport=0xc123)/BTH(opcode
// 0x04, dqpn 0x11, psn 0x102, ackreq)/"softverbs!!!"), ICRC by scapy's RoCE
// layer: our builder makes the same bytes, lengths, checksums and ICRC.
TEST(RocePacket, SameBytesAsScapy) {
  const std::vector<uint8_t> scapy = FromHex(
      "45000038000040004011e64ac6336401c6336402c12312b70024fbc50400ffff0000001180000102736f66747665"
      "7262732121216a129586");
  TransportFields f;
  f.opcode = 0x04;
  f.dest_qp = 0x11;
  f.psn = 0x102;
  f.ack_req = true;
  const std::string text = "softverbs!!!";
  std::vector<uint8_t> buf(256);
  WireError error;
  const size_t len = BuildPacket(
      V4(), f, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()), buf, &error);
  buf.resize(len);
  EXPECT_EQ(buf, scapy);
  ParsedPacket out;
  EXPECT_EQ(ParsePacket(scapy, &out), WireError::kOk);
}

TEST(RocePacket, VariantFieldsDoNotChangeTheIcrc) {
  std::vector<uint8_t> buf(256);
  WireError error;
  const size_t len = BuildPacket(V4(), AllFields(0x0a), std::span<const uint8_t>(), buf, &error);
  ASSERT_NE(len, 0u);
  buf.resize(len);
  // TTL, TOS, IP checksum, UDP checksum and the BTH's FECN/BECN byte may
  // change on the way (routers, ECN marking): the ICRC still holds.
  buf[1] = 0x03;    // TOS (ECN CE)
  buf[8] = 1;       // TTL
  buf[10] ^= 0xff;  // IP checksum
  buf[26] ^= 0xff;  // UDP checksum
  buf[28 + 4] = kBthFecn;
  ParsedPacket out;
  EXPECT_EQ(ParsePacket(buf, &out), WireError::kOk);
  EXPECT_TRUE(out.fields.fecn);
  // An invariant one (the PSN) does.
  buf[28 + 11] ^= 1;
  EXPECT_EQ(ParsePacket(buf, &out), WireError::kBadIcrc);
}

std::vector<uint8_t> Good(bool ipv6, uint8_t opcode = 0x04, size_t payload = 16) {
  std::vector<uint8_t> data(payload, 0x42), buf(512);
  WireError error;
  const size_t len = BuildPacket(ipv6 ? V6() : V4(), AllFields(opcode), data, buf, &error);
  buf.resize(len);
  return buf;
}

WireError Parse(const std::vector<uint8_t>& p) {
  ParsedPacket out;
  return ParsePacket(p, &out);
}

// Segment k of a UDP GSO run leaves with IPv4 ID k and an ICRC made for it;
// the receiving socket does not see the ID (its view of the header has 0).
TEST(RoceIcrc, AnIpv4IdOfAGsoRunIsAccepted) {
  constexpr size_t kHead = sizeof(Ipv4Header) + sizeof(UdpHeader);
  for (uint16_t id : {0, 1, 2, 37, 63, 64, 1000, 65535}) {
    std::vector<uint8_t> buf = Good(false, 0x04, 100);
    const std::vector<uint8_t> header0(buf.begin(), buf.begin() + kHead);
    buf[4] = static_cast<uint8_t>(id >> 8);
    buf[5] = static_cast<uint8_t>(id);
    const std::span<const uint8_t> roce(buf.data() + kHead, buf.size() - kHead);
    const auto body = roce.first(roce.size() - kIcrcBytes);
    const uint32_t with_id = ComputeIcrc(std::span(buf.data(), kHead), body);
    StoreIcrc(with_id, buf.data() + buf.size() - kIcrcBytes);
    // The delta of the ID is what the header's ID changes in the ICRC.
    EXPECT_EQ(ComputeIcrc(header0, body) ^ Ipv4IdIcrcDelta(id, body.size()), with_id) << id;
    TransportFields fields;
    std::span<const uint8_t> payload;
    uint16_t found = 0xffff;
    EXPECT_EQ(ParseRoce(header0, roce, &fields, &payload, &found),
              id < kIcrcIpv4Ids ? WireError::kOk : WireError::kBadIcrc)
        << id;
    if (id < kIcrcIpv4Ids) {
      EXPECT_EQ(found, id);  // the ID the ICRC was made for
    }
    // A corrupted byte is refused whatever the ID.
    buf[kHead + 20] ^= 0x10;
    EXPECT_EQ(ParseRoce(header0, roce, &fields, &payload), WireError::kBadIcrc) << id;
  }
}

// Every 16-bit ID's delta solves back to that ID (the IDs below
// kIcrcIpv4Ids through their ready table, the others through the basis),
// for lengths that alternate, as an 8-byte WRITE's packets and their ACKs do.
TEST(RoceIcrc, EveryIpv4IdIsFoundFromItsDelta) {
  for (int round = 0; round < 2; ++round) {
    for (size_t roce_bytes : {size_t{40}, size_t{16}, size_t{1052}}) {
      for (uint32_t id = 0; id <= 0xffff; ++id) {
        const uint32_t delta = Ipv4IdIcrcDelta(static_cast<uint16_t>(id), roce_bytes);
        uint16_t found = 0;
        ASSERT_TRUE(Ipv4IdOfIcrcDelta(delta, roce_bytes, &found)) << id << " " << roce_bytes;
        ASSERT_EQ(found, id) << roce_bytes;
      }
      // A delta outside the span of the sixteen (a corrupted packet's, 1 -
      // 2^-16 of them) is no ID's.
      uint16_t found = 0;
      int solved = 0;
      for (uint32_t v = 1; v < 4096; ++v)
        solved += Ipv4IdOfIcrcDelta(v * 0x01000193u, roce_bytes, &found);
      EXPECT_LE(solved, 2) << roce_bytes;
    }
  }
}

// The part of a GSO run that an older kernel refused goes as a send of its
// own: its packet k, made for ID from + k, gets the ICRC of ID k.
TEST(RoceIcrc, ARunsPacketsAreRenumberedFromIdZero) {
  constexpr size_t kHead = sizeof(Ipv4Header) + sizeof(UdpHeader);
  constexpr uint16_t kFrom = 64;
  // Made for IDs kFrom + k: two packets of one length and a shorter last one.
  auto made_for = [&](size_t payload, uint16_t id, std::vector<uint8_t>* header0) {
    std::vector<uint8_t> buf = Good(false, 0x04, payload);
    header0->assign(buf.begin(), buf.begin() + kHead);
    buf[4] = static_cast<uint8_t>(id >> 8);
    buf[5] = static_cast<uint8_t>(id);
    const size_t transport = buf.size() - kHead - kIcrcBytes;
    StoreIcrc(ComputeIcrc(std::span(buf.data(), kHead), std::span(buf.data() + kHead, transport)),
              buf.data() + buf.size() - kIcrcBytes);
    return std::vector<uint8_t>(buf.begin() + kHead, buf.end());
  };
  std::vector<std::vector<uint8_t>> headers(3);
  std::vector<uint8_t> run;
  const size_t payloads[] = {100, 100, 36};
  size_t segment = 0;
  for (uint16_t k = 0; k < 3; ++k) {
    const std::vector<uint8_t> roce = made_for(payloads[k], kFrom + k, &headers[k]);
    if (k == 0) segment = roce.size();
    run.insert(run.end(), roce.begin(), roce.end());
  }
  RenumberIpv4Run(run.data(), run.size(), segment, kFrom);
  for (uint16_t k = 0; k < 3; ++k) {
    const size_t off = k * segment;
    const size_t len = std::min(segment, run.size() - off);
    const std::span<const uint8_t> roce(run.data() + off, len);
    TransportFields fields;
    std::span<const uint8_t> payload;
    uint16_t found = 0xffff;
    ASSERT_EQ(ParseRoce(headers[k], roce, &fields, &payload, &found), WireError::kOk) << k;
    EXPECT_EQ(found, k);  // made for ID k now
    EXPECT_EQ(payload.size(), payloads[k]);
  }
}

// A packet as rxe sends it over IPv4: the ID from the kernel's counter
// (__ip_select_ident), here 0x4d21, and the ICRC made for it; built by
// scapy 2.5's RoCE layer, not by us: IP(src=198.51.100.1, dst=198.51.100.2,
// id=0x4d21, flags=DF) / UDP(sport=0xc0de, dport=4791) / BTH(opcode=4,
// dqpn=0x12, psn=0x123, pkey=0xffff) / "rxe says hello!!" (BTH onwards).
constexpr uint8_t kRxeSendOnly[] = {
    0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00, 0x01, 0x23, 0x72, 0x78, 0x65, 0x20,
    0x73, 0x61, 0x79, 0x73, 0x20, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x21, 0x21, 0x1b, 0x55, 0x7c, 0x4f};

TEST(RoceIcrc, AnRxePacketIsAcceptedWhenItsIdFollowsItsSourcesLast) {
  Endpoints ends = V4();
  ends.src_port = 0xc0de;
  uint8_t ip_udp[48];
  WriteIpUdp(ends, sizeof(kRxeSendOnly), ip_udp);  // what the socket shows: ID 0
  const std::span<const uint8_t> header(ip_udp, IpUdpBytes(false));
  uint32_t src;
  std::memcpy(&src, ends.src, 4);
  TransportFields fields;
  std::span<const uint8_t> payload;
  uint16_t id = 0;
  // Without a history, only softverbs' own IDs (0..63) are believed.
  EXPECT_EQ(ParseRoce(header, kRxeSendOnly, &fields, &payload, &id), WireError::kBadIcrc);
  // The first packet of a source is refused, its ID remembered.
  Ipv4IdHistory first;
  EXPECT_EQ(ParseRoce(header, kRxeSendOnly, &fields, &payload, &id, &first), WireError::kBadIcrc);
  // After the source's packet 0x4d20 (a CM MAD, say), 0x4d21 follows.
  Ipv4IdHistory history;
  EXPECT_TRUE(history.Accept(src, 0xc0de, 0x4d20, /*gsi=*/true));
  ASSERT_EQ(ParseRoce(header, kRxeSendOnly, &fields, &payload, &id, &history), WireError::kOk);
  EXPECT_EQ(id, 0x4d21);
  EXPECT_EQ(fields.dest_qp, 0x12u);
  EXPECT_EQ(fields.psn, 0x123u);
  EXPECT_EQ(std::string(payload.begin(), payload.end()), "rxe says hello!!");
  // A corrupted byte is refused even so.
  std::vector<uint8_t> bad(std::begin(kRxeSendOnly), std::end(kRxeSendOnly));
  bad[14] ^= 0x01;
  EXPECT_TRUE(history.Accept(src, 0xc0de, 0x4d21, true));
  EXPECT_EQ(ParseRoce(header, bad, &fields, &payload, &id, &history), WireError::kBadIcrc);
}

TEST(RocePacket, MalformedPacketsAreRefusedWithTheirReason) {
  for (bool ipv6 : {false, true}) {
    const size_t head = IpUdpBytes(ipv6);
    std::vector<uint8_t> p = Good(ipv6);
    // Truncated anywhere: too short (the IP length says more).
    for (size_t n : {size_t{0}, size_t{10}, head - 1, head + 5, p.size() - 1}) {
      EXPECT_EQ(Parse(std::vector<uint8_t>(p.begin(), p.begin() + n)), WireError::kTooShort) << n;
    }
    // Link padding after the packet is ignored.
    p.push_back(0);
    EXPECT_EQ(Parse(p), WireError::kOk);
    p = Good(ipv6);
    p[head] = 0x15;  // RESYNC
    EXPECT_EQ(Parse(p), WireError::kBadOpcode);
    p[head] = 0x2c;  // UC RDMA_READ_REQUEST
    EXPECT_EQ(Parse(p), WireError::kBadOpcode);
    p = Good(ipv6);
    p[head + 1] |= 1;  // TVer 1
    EXPECT_EQ(Parse(p), WireError::kBadVersion);
    p = Good(ipv6);
    p.back() ^= 0x80;  // ICRC
    EXPECT_EQ(Parse(p), WireError::kBadIcrc);
    p = Good(ipv6);
    p[head + 20] ^= 0x01;  // payload byte
    EXPECT_EQ(Parse(p), WireError::kBadIcrc);
    p = Good(ipv6);
    p[head - 5] = 0x12;  // UDP destination port 4626
    EXPECT_EQ(Parse(p), WireError::kNotRoce);
    p = Good(ipv6);
    p[0] = (p[0] & 0x0f) | 0x50;
    EXPECT_EQ(Parse(p), WireError::kNotIp);
    p = Good(ipv6);
    p[ipv6 ? 6 : 9] = 6;  // TCP
    EXPECT_EQ(Parse(p), WireError::kNotUdp);
    p = Good(ipv6);
    p[head - 3] += 4;  // UDP length
    EXPECT_EQ(Parse(p), WireError::kBadLength);
    // An ACK with bytes after its AETH.
    p = Good(ipv6, 0x11, 0);
    std::vector<uint8_t> data(4, 1), buf(512);
    EXPECT_EQ(Parse(p), WireError::kOk);
    WireError error;
    EXPECT_EQ(BuildPacket(ipv6 ? V6() : V4(), AllFields(0x11), data, buf, &error), 0u);
    EXPECT_EQ(error, WireError::kUnexpectedPayload);
  }
  std::vector<uint8_t> p = Good(false);
  p[0] = 0x46;
  EXPECT_EQ(Parse(p), WireError::kIpOptions);
  // A packet one byte too short for its opcode's headers (ATOMIC, no payload).
  std::vector<uint8_t> buf(512);
  WireError error;
  EXPECT_EQ(BuildPacket(V4(), AllFields(0x13), std::span<const uint8_t>(), std::span(buf).first(40),
                        &error),
            0u);
  EXPECT_EQ(error, WireError::kBufferTooSmall);
  EXPECT_STREQ(WireErrorName(WireError::kBadIcrc), "bad ICRC");
}

TEST(RocePacket, TransportTooShortForItsHeaders) {
  // A READ request (BTH + RETH) cut inside its RETH, ICRC of the cut bytes valid.
  std::vector<uint8_t> p = Good(false, 0x0c, 0);
  TransportFields f;
  std::span<const uint8_t> payload;
  std::vector<uint8_t> cut(p.begin() + 28, p.begin() + 28 + 12 + 8);
  EXPECT_EQ(ParseTransport(cut, &f, &payload), WireError::kTooShort);
}

TEST(RoceFlow, SourcePortsAsRxe) {
  // hash_32(qpn, 14) | 0xc000, and the flow-label fold.
  EXPECT_EQ(SourcePortOfQpn(0), 0xc000);
  EXPECT_EQ(SourcePortOfQpn(1), 0xc000 | (0x61c88647u >> 18));
  for (uint32_t q = 0; q < 5000; ++q) EXPECT_GE(SourcePortOfQpn(q), 0xc000);
  EXPECT_EQ(SourcePortOfFlowLabel(0x00001), 0xc001);
  EXPECT_EQ(SourcePortOfFlowLabel(0x04000), 0xc001);
  EXPECT_EQ(SourcePortOfFlowLabel(0xfffff), 0xc000 | (0x3fff ^ 0x3f));
}

}  // namespace
}  // namespace softverbs::roce
