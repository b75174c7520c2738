#include "roce/cm_mad.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace softverbs::roce {

namespace {

// The scalar fields a row can place.
enum class F : uint8_t {
  kLocalCommId,
  kRemoteCommId,
  kServiceId,
  kLocalCaGuid,
  kQkey,
  kQpn,
  kResponderResources,
  kInitiatorDepth,
  kRemoteCmResponseTimeout,
  kTransport,
  kFlowControl,
  kStartingPsn,
  kLocalCmResponseTimeout,
  kRetryCount,
  kPkey,
  kPathMtu,
  kRnrRetryCount,
  kMaxCmRetries,
  kSrq,
  kExtendedTransport,
  kLocalLid,
  kRemoteLid,
  kFlowLabel,
  kPacketRate,
  kTrafficClass,
  kHopLimit,
  kSl,
  kLocalAckTimeout,
  kTargetAckDelay,
  kMessageRejected,
  kReason,
  kStatus,
  kMessageMraed,
  kServiceTimeout,
};

struct Row {
  CmAttr attr;
  F field;
  CmFieldLoc loc;
};

// IBA tables 106-108, 110-113, 118, 119 (the fields rdma_cm sets).
constexpr Row kRows[] = {
    // REQ (table 106)
    {CmAttr::kReq, F::kLocalCommId, {0, 0, 32}},
    {CmAttr::kReq, F::kServiceId, {8, 0, 64}},
    {CmAttr::kReq, F::kLocalCaGuid, {16, 0, 64}},
    {CmAttr::kReq, F::kQkey, {28, 0, 32}},
    {CmAttr::kReq, F::kQpn, {32, 0, 24}},
    {CmAttr::kReq, F::kResponderResources, {35, 0, 8}},
    {CmAttr::kReq, F::kInitiatorDepth, {39, 0, 8}},
    {CmAttr::kReq, F::kRemoteCmResponseTimeout, {43, 0, 5}},
    {CmAttr::kReq, F::kTransport, {43, 5, 2}},
    {CmAttr::kReq, F::kFlowControl, {43, 7, 1}},
    {CmAttr::kReq, F::kStartingPsn, {44, 0, 24}},
    {CmAttr::kReq, F::kLocalCmResponseTimeout, {47, 0, 5}},
    {CmAttr::kReq, F::kRetryCount, {47, 5, 3}},
    {CmAttr::kReq, F::kPkey, {48, 0, 16}},
    {CmAttr::kReq, F::kPathMtu, {50, 0, 4}},
    {CmAttr::kReq, F::kRnrRetryCount, {50, 5, 3}},
    {CmAttr::kReq, F::kMaxCmRetries, {51, 0, 4}},
    {CmAttr::kReq, F::kSrq, {51, 4, 1}},
    {CmAttr::kReq, F::kExtendedTransport, {51, 5, 3}},
    {CmAttr::kReq, F::kLocalLid, {52, 0, 16}},
    {CmAttr::kReq, F::kRemoteLid, {54, 0, 16}},
    // local GID at 56, remote GID at 72 (16 bytes each)
    {CmAttr::kReq, F::kFlowLabel, {88, 0, 20}},
    {CmAttr::kReq, F::kPacketRate, {91, 2, 6}},
    {CmAttr::kReq, F::kTrafficClass, {92, 0, 8}},
    {CmAttr::kReq, F::kHopLimit, {93, 0, 8}},
    {CmAttr::kReq, F::kSl, {94, 0, 4}},
    {CmAttr::kReq, F::kLocalAckTimeout, {95, 0, 5}},
    // MRA (table 107)
    {CmAttr::kMra, F::kLocalCommId, {0, 0, 32}},
    {CmAttr::kMra, F::kRemoteCommId, {4, 0, 32}},
    {CmAttr::kMra, F::kMessageMraed, {8, 0, 2}},
    {CmAttr::kMra, F::kServiceTimeout, {9, 0, 5}},
    // REJ (table 108)
    {CmAttr::kRej, F::kLocalCommId, {0, 0, 32}},
    {CmAttr::kRej, F::kRemoteCommId, {4, 0, 32}},
    {CmAttr::kRej, F::kMessageRejected, {8, 0, 2}},
    {CmAttr::kRej, F::kReason, {10, 0, 16}},
    // REP (table 110)
    {CmAttr::kRep, F::kLocalCommId, {0, 0, 32}},
    {CmAttr::kRep, F::kRemoteCommId, {4, 0, 32}},
    {CmAttr::kRep, F::kQkey, {8, 0, 32}},
    {CmAttr::kRep, F::kQpn, {12, 0, 24}},
    {CmAttr::kRep, F::kStartingPsn, {20, 0, 24}},
    {CmAttr::kRep, F::kResponderResources, {24, 0, 8}},
    {CmAttr::kRep, F::kInitiatorDepth, {25, 0, 8}},
    {CmAttr::kRep, F::kTargetAckDelay, {26, 0, 5}},
    {CmAttr::kRep, F::kFlowControl, {26, 7, 1}},
    {CmAttr::kRep, F::kRnrRetryCount, {27, 0, 3}},
    {CmAttr::kRep, F::kSrq, {27, 3, 1}},
    {CmAttr::kRep, F::kLocalCaGuid, {28, 0, 64}},
    // RTU (table 111), DREQ (112), DREP (113)
    {CmAttr::kRtu, F::kLocalCommId, {0, 0, 32}},
    {CmAttr::kRtu, F::kRemoteCommId, {4, 0, 32}},
    {CmAttr::kDreq, F::kLocalCommId, {0, 0, 32}},
    {CmAttr::kDreq, F::kRemoteCommId, {4, 0, 32}},
    {CmAttr::kDreq, F::kQpn, {8, 0, 24}},
    {CmAttr::kDrep, F::kLocalCommId, {0, 0, 32}},
    {CmAttr::kDrep, F::kRemoteCommId, {4, 0, 32}},
    // SIDR REQ (table 118), SIDR REP (119)
    {CmAttr::kSidrReq, F::kLocalCommId, {0, 0, 32}},
    {CmAttr::kSidrReq, F::kPkey, {4, 0, 16}},
    {CmAttr::kSidrReq, F::kServiceId, {8, 0, 64}},
    {CmAttr::kSidrRep, F::kRemoteCommId, {0, 0, 32}},
    {CmAttr::kSidrRep, F::kStatus, {4, 0, 8}},
    {CmAttr::kSidrRep, F::kQpn, {8, 0, 24}},
    {CmAttr::kSidrRep, F::kServiceId, {12, 0, 64}},
    {CmAttr::kSidrRep, F::kQkey, {20, 0, 32}},
};

// Private data: where it starts and how long it is (the tables' last row).
struct PrivateData {
  CmAttr attr;
  uint16_t offset;
  uint16_t bytes;
};
constexpr PrivateData kPrivateData[] = {
    {CmAttr::kReq, 140, 92}, {CmAttr::kMra, 10, 222},     {CmAttr::kRej, 84, 148},
    {CmAttr::kRep, 36, 196}, {CmAttr::kRtu, 8, 224},      {CmAttr::kDreq, 12, 220},
    {CmAttr::kDrep, 8, 224}, {CmAttr::kSidrReq, 16, 216}, {CmAttr::kSidrRep, 96, 136},
};
static_assert(std::all_of(std::begin(kPrivateData), std::end(kPrivateData),
                          [](const PrivateData& p) { return p.offset + p.bytes == kCmDataBytes; }));

constexpr uint16_t kReqLocalGid = 56;
constexpr uint16_t kReqRemoteGid = 72;

const PrivateData* PrivateOf(CmAttr attr) {
  for (const PrivateData& p : kPrivateData) {
    if (p.attr == attr) return &p;
  }
  return nullptr;
}

// The scalar of m a row names, widened to 64 bits.
uint64_t Get(const CmMad& m, F f) {
  switch (f) {
    case F::kLocalCommId:
      return m.local_comm_id;
    case F::kRemoteCommId:
      return m.remote_comm_id;
    case F::kServiceId:
      return m.service_id;
    case F::kLocalCaGuid:
      return m.local_ca_guid;
    case F::kQkey:
      return m.qkey;
    case F::kQpn:
      return m.qpn;
    case F::kResponderResources:
      return m.responder_resources;
    case F::kInitiatorDepth:
      return m.initiator_depth;
    case F::kRemoteCmResponseTimeout:
      return m.remote_cm_response_timeout;
    case F::kTransport:
      return m.transport;
    case F::kFlowControl:
      return m.flow_control;
    case F::kStartingPsn:
      return m.starting_psn;
    case F::kLocalCmResponseTimeout:
      return m.local_cm_response_timeout;
    case F::kRetryCount:
      return m.retry_count;
    case F::kPkey:
      return m.pkey;
    case F::kPathMtu:
      return m.path_mtu;
    case F::kRnrRetryCount:
      return m.rnr_retry_count;
    case F::kMaxCmRetries:
      return m.max_cm_retries;
    case F::kSrq:
      return m.srq;
    case F::kExtendedTransport:
      return m.extended_transport;
    case F::kLocalLid:
      return m.local_lid;
    case F::kRemoteLid:
      return m.remote_lid;
    case F::kFlowLabel:
      return m.flow_label;
    case F::kPacketRate:
      return m.packet_rate;
    case F::kTrafficClass:
      return m.traffic_class;
    case F::kHopLimit:
      return m.hop_limit;
    case F::kSl:
      return m.sl;
    case F::kLocalAckTimeout:
      return m.local_ack_timeout;
    case F::kTargetAckDelay:
      return m.target_ack_delay;
    case F::kMessageRejected:
      return m.message_rejected;
    case F::kReason:
      return m.reason;
    case F::kStatus:
      return m.status;
    case F::kMessageMraed:
      return m.message_mraed;
    case F::kServiceTimeout:
      return m.service_timeout;
  }
  return 0;
}

template <typename T>
void Put(T* field, uint64_t v) {
  *field = static_cast<T>(v);
}

void Set(CmMad* m, F f, uint64_t v) {
  switch (f) {
    case F::kLocalCommId:
      return Put(&m->local_comm_id, v);
    case F::kRemoteCommId:
      return Put(&m->remote_comm_id, v);
    case F::kServiceId:
      return Put(&m->service_id, v);
    case F::kLocalCaGuid:
      return Put(&m->local_ca_guid, v);
    case F::kQkey:
      return Put(&m->qkey, v);
    case F::kQpn:
      return Put(&m->qpn, v);
    case F::kResponderResources:
      return Put(&m->responder_resources, v);
    case F::kInitiatorDepth:
      return Put(&m->initiator_depth, v);
    case F::kRemoteCmResponseTimeout:
      return Put(&m->remote_cm_response_timeout, v);
    case F::kTransport:
      return Put(&m->transport, v);
    case F::kFlowControl:
      return Put(&m->flow_control, v);
    case F::kStartingPsn:
      return Put(&m->starting_psn, v);
    case F::kLocalCmResponseTimeout:
      return Put(&m->local_cm_response_timeout, v);
    case F::kRetryCount:
      return Put(&m->retry_count, v);
    case F::kPkey:
      return Put(&m->pkey, v);
    case F::kPathMtu:
      return Put(&m->path_mtu, v);
    case F::kRnrRetryCount:
      return Put(&m->rnr_retry_count, v);
    case F::kMaxCmRetries:
      return Put(&m->max_cm_retries, v);
    case F::kSrq:
      return Put(&m->srq, v);
    case F::kExtendedTransport:
      return Put(&m->extended_transport, v);
    case F::kLocalLid:
      return Put(&m->local_lid, v);
    case F::kRemoteLid:
      return Put(&m->remote_lid, v);
    case F::kFlowLabel:
      return Put(&m->flow_label, v);
    case F::kPacketRate:
      return Put(&m->packet_rate, v);
    case F::kTrafficClass:
      return Put(&m->traffic_class, v);
    case F::kHopLimit:
      return Put(&m->hop_limit, v);
    case F::kSl:
      return Put(&m->sl, v);
    case F::kLocalAckTimeout:
      return Put(&m->local_ack_timeout, v);
    case F::kTargetAckDelay:
      return Put(&m->target_ack_delay, v);
    case F::kMessageRejected:
      return Put(&m->message_rejected, v);
    case F::kReason:
      return Put(&m->reason, v);
    case F::kStatus:
      return Put(&m->status, v);
    case F::kMessageMraed:
      return Put(&m->message_mraed, v);
    case F::kServiceTimeout:
      return Put(&m->service_timeout, v);
  }
}

// Big-endian bit fields within the (at most 8) bytes from loc.byte.
uint64_t ReadBits(const uint8_t* data, CmFieldLoc loc) {
  const unsigned span = (loc.bit + loc.bits + 7) / 8;
  uint64_t raw = 0;
  for (unsigned i = 0; i < span; ++i) raw = (raw << 8) | data[loc.byte + i];
  const unsigned shift = span * 8 - loc.bit - loc.bits;
  const uint64_t mask = loc.bits == 64 ? ~0ull : ((1ull << loc.bits) - 1);
  return (raw >> shift) & mask;
}

void WriteBits(uint8_t* data, CmFieldLoc loc, uint64_t value) {
  const unsigned span = (loc.bit + loc.bits + 7) / 8;
  uint64_t raw = 0;
  for (unsigned i = 0; i < span; ++i) raw = (raw << 8) | data[loc.byte + i];
  const unsigned shift = span * 8 - loc.bit - loc.bits;
  const uint64_t mask = (loc.bits == 64 ? ~0ull : ((1ull << loc.bits) - 1)) << shift;
  raw = (raw & ~mask) | ((value << shift) & mask);
  for (unsigned i = span; i-- > 0;) {
    data[loc.byte + i] = static_cast<uint8_t>(raw);
    raw >>= 8;
  }
}

void PutBe16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

}  // namespace

size_t CmPrivateDataBytes(CmAttr attr) {
  const PrivateData* p = PrivateOf(attr);
  return p ? p->bytes : 0;
}

bool EncodeCmMad(const CmMad& m, std::span<uint8_t, kMadBytes> out) {
  const PrivateData* priv = PrivateOf(m.attr);
  if (!priv) return false;
  std::fill(out.begin(), out.end(), 0);
  uint8_t* h = out.data();
  h[0] = kMadBaseVersion;
  h[1] = kMgmtClassCm;
  h[2] = kCmClassVersion;
  h[3] = kMadMethodSend;
  for (int i = 0; i < 8; ++i) h[8 + i] = static_cast<uint8_t>(m.transaction_id >> (56 - 8 * i));
  PutBe16(h + 16, static_cast<uint16_t>(m.attr));
  uint8_t* data = h + kMadHeaderBytes;
  for (const Row& r : kRows) {
    if (r.attr == m.attr) WriteBits(data, r.loc, Get(m, r.field));
  }
  if (m.attr == CmAttr::kReq) {
    memcpy(data + kReqLocalGid, m.local_gid, 16);
    memcpy(data + kReqRemoteGid, m.remote_gid, 16);
  }
  memcpy(data + priv->offset, m.private_data, priv->bytes);
  return true;
}

bool DecodeCmMad(std::span<const uint8_t> in, CmMad* m) {
  if (in.size() < kMadBytes) return false;
  const uint8_t* h = in.data();
  if (h[0] != kMadBaseVersion || h[1] != kMgmtClassCm || h[2] != kCmClassVersion ||
      h[3] != kMadMethodSend) {
    return false;
  }
  *m = CmMad{};
  m->attr = static_cast<CmAttr>((h[16] << 8) | h[17]);
  const PrivateData* priv = PrivateOf(m->attr);
  if (!priv) return false;
  for (int i = 0; i < 8; ++i) m->transaction_id = (m->transaction_id << 8) | h[8 + i];
  const uint8_t* data = h + kMadHeaderBytes;
  for (const Row& r : kRows) {
    if (r.attr == m->attr) Set(m, r.field, ReadBits(data, r.loc));
  }
  if (m->attr == CmAttr::kReq) {
    memcpy(m->local_gid, data + kReqLocalGid, 16);
    memcpy(m->remote_gid, data + kReqRemoteGid, 16);
  }
  memcpy(m->private_data, data + priv->offset, priv->bytes);
  return true;
}

}  // namespace softverbs::roce
