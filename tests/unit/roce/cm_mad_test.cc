// CM MADs (roce/cm_mad.h): fields land where the IBA's tables put them
// (checked byte by byte against the tables, not against the decoder), and
// every message kind survives a round trip.
#include "roce/cm_mad.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>

namespace softverbs::roce {
namespace {

TEST(RoceCmMad, ReqFieldsAreWhereTable106PutsThem) {
  CmMad m;
  m.attr = CmAttr::kReq;
  m.transaction_id = 0x0102030405060708ull;
  m.local_comm_id = 0xa1b2c3d4;
  m.service_id = CmaServiceId(0x0106, 7174);  // RDMA_PS_TCP, port 7174
  m.qkey = 0x11223344;
  m.qpn = 0xabcdef;
  m.responder_resources = 4;
  m.initiator_depth = 5;
  m.remote_cm_response_timeout = 20;
  m.transport = 1;  // UC
  m.flow_control = 1;
  m.starting_psn = 0x123456;
  m.local_cm_response_timeout = 20;
  m.retry_count = 7;
  m.pkey = 0xffff;
  m.path_mtu = 3;  // IBV_MTU_1024
  m.rnr_retry_count = 6;
  m.max_cm_retries = 15;
  m.srq = 1;
  m.local_gid[15] = 0x42;
  m.remote_gid[0] = 0xfe;
  m.hop_limit = 64;
  m.local_ack_timeout = 18;
  m.private_data[0] = 0x00;
  m.private_data[1] = 0x40;
  m.private_data[91] = 0x99;
  std::array<uint8_t, kMadBytes> mad{};
  ASSERT_TRUE(EncodeCmMad(m, mad));
  // MAD header (IBA 13.4.2): version 1, class 7 (CM), class version 2, Send.
  EXPECT_EQ(mad[0], 1);
  EXPECT_EQ(mad[1], 0x07);
  EXPECT_EQ(mad[2], 2);
  EXPECT_EQ(mad[3], 0x03);
  EXPECT_EQ(mad[8], 0x01);
  EXPECT_EQ(mad[15], 0x08);
  EXPECT_EQ(mad[16], 0x00);
  EXPECT_EQ(mad[17], 0x10);  // REQ
  const uint8_t* d = mad.data() + 24;
  EXPECT_EQ(d[0], 0xa1);
  EXPECT_EQ(d[3], 0xd4);
  // Service id 0x0000000001061C06.
  const uint8_t sid[8] = {0, 0, 0, 0, 0x01, 0x06, 0x1c, 0x06};
  EXPECT_EQ(memcmp(d + 8, sid, 8), 0);
  EXPECT_EQ(d[28], 0x11);
  EXPECT_EQ(d[31], 0x44);
  EXPECT_EQ(d[32], 0xab);
  EXPECT_EQ(d[34], 0xef);
  EXPECT_EQ(d[35], 4);
  EXPECT_EQ(d[39], 5);
  // Byte 43: timeout 20 in bits 0-4 (10100), transport UC in 5-6 (01), flow control 1.
  EXPECT_EQ(d[43], 0b10100011);
  EXPECT_EQ(d[44], 0x12);
  EXPECT_EQ(d[46], 0x56);
  // Byte 47: timeout 20 (10100), retry count 7 (111).
  EXPECT_EQ(d[47], 0b10100111);
  EXPECT_EQ(d[48], 0xff);
  // Byte 50: MTU 3 in bits 0-3, RDC 0, RNR retry 6 (110).
  EXPECT_EQ(d[50], 0b00110110);
  // Byte 51: max CM retries 15, SRQ 1.
  EXPECT_EQ(d[51], 0b11111000);
  EXPECT_EQ(d[56 + 15], 0x42);
  EXPECT_EQ(d[72], 0xfe);
  EXPECT_EQ(d[93], 64);
  EXPECT_EQ(d[95], 18 << 3);
  EXPECT_EQ(d[140 + 1], 0x40);
  EXPECT_EQ(d[231], 0x99);

  CmMad back;
  ASSERT_TRUE(DecodeCmMad(mad, &back));
  EXPECT_EQ(back.attr, CmAttr::kReq);
  EXPECT_EQ(back.transaction_id, m.transaction_id);
  EXPECT_EQ(back.service_id, m.service_id);
  EXPECT_EQ(back.qpn, m.qpn);
  EXPECT_EQ(back.starting_psn, m.starting_psn);
  EXPECT_EQ(back.transport, 1);
  EXPECT_EQ(back.rnr_retry_count, 6);
  EXPECT_EQ(back.srq, 1);
  EXPECT_EQ(back.local_ack_timeout, 18);
  EXPECT_EQ(memcmp(back.local_gid, m.local_gid, 16), 0);
  EXPECT_EQ(memcmp(back.private_data, m.private_data, 92), 0);
}

TEST(RoceCmMad, EveryKindRoundTrips) {
  for (CmAttr attr : {CmAttr::kMra, CmAttr::kRep, CmAttr::kRtu, CmAttr::kRej, CmAttr::kDreq,
                      CmAttr::kDrep, CmAttr::kSidrReq, CmAttr::kSidrRep}) {
    CmMad m;
    m.attr = attr;
    m.local_comm_id = 0x01020304;
    m.remote_comm_id = 0x05060708;
    m.qpn = 0x000abc;
    m.qkey = 0x01234567;
    m.reason = 28;
    m.status = 2;
    m.message_mraed = 1;
    m.service_timeout = 24;
    m.service_id = 0x1110000 | 99;
    const size_t priv = CmPrivateDataBytes(attr);
    ASSERT_GT(priv, 0u);
    m.private_data[priv - 1] = 0x5a;
    std::array<uint8_t, kMadBytes> mad{};
    ASSERT_TRUE(EncodeCmMad(m, mad));
    EXPECT_EQ(mad[255], 0x5a) << "private data ends the MAD";
    CmMad back;
    ASSERT_TRUE(DecodeCmMad(mad, &back));
    EXPECT_EQ(back.attr, attr);
    EXPECT_EQ(back.private_data[priv - 1], 0x5a);
    if (attr == CmAttr::kRep) {
      EXPECT_EQ(back.qpn, 0xabcu);
      EXPECT_EQ(back.qkey, 0x01234567u);
      EXPECT_EQ(mad[24 + 12 + 2], 0xbc);  // table 110: local QPN at byte 12
    }
    if (attr == CmAttr::kMra) {
      EXPECT_EQ(back.remote_comm_id, 0x05060708u);
      EXPECT_EQ(back.message_mraed, 1);
      EXPECT_EQ(mad[24 + 8], 0x40);  // table 107: message MRAed, bits 0-1 of byte 8
      EXPECT_EQ(back.service_timeout, 24);
      EXPECT_EQ(mad[24 + 9], 24 << 3);  // service timeout, bits 0-4 of byte 9
    }
    if (attr == CmAttr::kRej) {
      EXPECT_EQ(back.reason, 28);
      EXPECT_EQ(mad[24 + 11], 28);  // table 108: reason at byte 10
    }
    if (attr == CmAttr::kSidrRep) {
      EXPECT_EQ(back.remote_comm_id, 0x05060708u);  // the request id it answers
      EXPECT_EQ(back.status, 2);
      EXPECT_EQ(back.service_id, m.service_id);
    }
  }
}

TEST(RoceCmMad, RefusesWhatIsNotACmSend) {
  std::array<uint8_t, kMadBytes> mad{};
  CmMad m;
  m.attr = CmAttr::kRtu;
  ASSERT_TRUE(EncodeCmMad(m, mad));
  CmMad back;
  EXPECT_FALSE(DecodeCmMad(std::span<const uint8_t>(mad.data(), 100), &back));
  auto bad = mad;
  bad[1] = 0x81;  // subnet management
  EXPECT_FALSE(DecodeCmMad(bad, &back));
  bad = mad;
  bad[17] = 0x19;  // LAP: not spoken
  EXPECT_FALSE(DecodeCmMad(bad, &back));
  m.attr = static_cast<CmAttr>(0x19);  // LAP
  EXPECT_FALSE(EncodeCmMad(m, mad));
}

}  // namespace
}  // namespace softverbs::roce
