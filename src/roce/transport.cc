#include "roce/transport.h"

#include <cstring>
#include <type_traits>

#include "datapath/ibta_opcode.h"
#include "roce/headers.h"

namespace softverbs::roce {
namespace dp = softverbs::datapath;

namespace {

const dp::IbtaOperationInfo& RowOf(uint8_t opcode) {
  return dp::IbtaOperationRow(dp::OperationOfOpcode(opcode));
}

// The extended headers (WireHeader bits) in their order on the wire, with
// their sizes.
struct HeaderSlot {
  uint8_t bit;
  size_t bytes;
};
constexpr HeaderSlot kWireOrder[] = {
    {dp::kHeaderReth, sizeof(Reth)},   {dp::kHeaderAtomicEth, sizeof(AtomicEth)},
    {dp::kHeaderAeth, sizeof(Aeth)},   {dp::kHeaderAtomicAckEth, sizeof(AtomicAckEth)},
    {dp::kHeaderImmDt, sizeof(ImmDt)}, {dp::kHeaderIeth, sizeof(Ieth)},
};

// Reading goes from const bytes to mutable fields, writing the other way:
// Byte (const uint8_t or uint8_t) says which, and the types follow.
template <typename Byte>
constexpr bool kReading = std::is_const_v<Byte>;
template <typename Byte, typename T>
using Like = std::conditional_t<kReading<Byte>, const T, T>;
template <typename Byte>
using FieldsFor = std::conditional_t<kReading<Byte>, TransportFields, const TransportFields>;

// Reads or writes one extended header at p.
template <typename Byte>
void Transfer(uint8_t bit, Byte* p, FieldsFor<Byte>* f) {
  switch (bit) {
    case dp::kHeaderReth: {
      auto* h = reinterpret_cast<Like<Byte, Reth>*>(p);
      if constexpr (kReading<Byte>) {
        f->va = h->va.get(), f->rkey = h->rkey.get(), f->dma_len = h->dma_len.get();
      } else {
        h->va.set(f->va), h->rkey.set(f->rkey), h->dma_len.set(f->dma_len);
      }
      break;
    }
    case dp::kHeaderAtomicEth: {
      auto* h = reinterpret_cast<Like<Byte, AtomicEth>*>(p);
      if constexpr (kReading<Byte>) {
        f->va = h->va.get(), f->rkey = h->rkey.get();
        f->swap_add = h->swap_add.get(), f->compare = h->compare.get();
      } else {
        h->va.set(f->va), h->rkey.set(f->rkey);
        h->swap_add.set(f->swap_add), h->compare.set(f->compare);
      }
      break;
    }
    case dp::kHeaderAeth: {
      auto* h = reinterpret_cast<Like<Byte, Aeth>*>(p);
      if constexpr (kReading<Byte>) {
        f->syndrome = h->syndrome, f->msn = h->msn.get();
      } else {
        h->syndrome = f->syndrome, h->msn.set(f->msn);
      }
      break;
    }
    case dp::kHeaderAtomicAckEth: {
      auto* h = reinterpret_cast<Like<Byte, AtomicAckEth>*>(p);
      if constexpr (kReading<Byte>) {
        f->atomic_orig = h->orig.get();
      } else {
        h->orig.set(f->atomic_orig);
      }
      break;
    }
    case dp::kHeaderImmDt: {
      auto* h = reinterpret_cast<Like<Byte, ImmDt>*>(p);
      if constexpr (kReading<Byte>) {
        f->imm = h->imm.get();
      } else {
        h->imm.set(f->imm);
      }
      break;
    }
    case dp::kHeaderIeth: {
      auto* h = reinterpret_cast<Like<Byte, Ieth>*>(p);
      if constexpr (kReading<Byte>) {
        f->invalidate_rkey = h->rkey.get();
      } else {
        h->rkey.set(f->invalidate_rkey);
      }
      break;
    }
  }
}

// Reads or writes all headers after the BTH; returns the bytes covered.
template <typename Byte>
size_t TransferExtended(uint8_t opcode, Byte* p, FieldsFor<Byte>* f) {
  Byte* start = p;
  if (CarriesXrcEth(opcode)) {
    auto* h = reinterpret_cast<Like<Byte, XrcEth>*>(p);
    if constexpr (kReading<Byte>) {
      f->xrc_srq = h->xrc_srq.get();
    } else {
      h->resv8 = 0, h->xrc_srq.set(f->xrc_srq);
    }
    p += sizeof(XrcEth);
  }
  if (CarriesDeth(opcode)) {
    auto* h = reinterpret_cast<Like<Byte, Deth>*>(p);
    if constexpr (kReading<Byte>) {
      f->qkey = h->qkey.get(), f->src_qp = h->src_qp.get();
    } else {
      h->qkey.set(f->qkey), h->resv8 = 0, h->src_qp.set(f->src_qp);
    }
    p += sizeof(Deth);
  }
  const uint8_t headers = RowOf(opcode).headers;
  for (const HeaderSlot& slot : kWireOrder) {
    if (headers & slot.bit) {
      Transfer(slot.bit, p, f);
      p += slot.bytes;
    }
  }
  return static_cast<size_t>(p - start);
}

}  // namespace

bool CarriesXrcEth(uint8_t opcode) {
  return dp::TransportOfOpcode(opcode) == dp::IbtaTransport::kXrc && !RowOf(opcode).response;
}

bool CarriesDeth(uint8_t opcode) {
  return dp::TransportOfOpcode(opcode) == dp::IbtaTransport::kUd;
}

size_t TransportHeaderBytes(uint8_t opcode) {
  if (!dp::IbtaOpcodeValid(opcode)) return 0;
  size_t bytes = sizeof(Bth);
  if (CarriesXrcEth(opcode)) bytes += sizeof(XrcEth);
  if (CarriesDeth(opcode)) bytes += sizeof(Deth);
  for (const HeaderSlot& slot : kWireOrder) {
    if (RowOf(opcode).headers & slot.bit) bytes += slot.bytes;
  }
  return bytes;
}

size_t BuildTransport(const TransportFields& fields, std::span<const uint8_t> payload,
                      std::span<uint8_t> out, WireError* error) {
  const size_t header_bytes = TransportHeaderBytes(fields.opcode);
  if (header_bytes == 0) {
    *error = WireError::kBadOpcode;
    return 0;
  }
  if (!payload.empty() && !RowOf(fields.opcode).payload) {
    *error = WireError::kUnexpectedPayload;
    return 0;
  }
  const size_t pad = PadBytes(payload.size());
  const size_t total = header_bytes + payload.size() + pad;
  if (out.size() < total) {
    *error = WireError::kBufferTooSmall;
    return 0;
  }
  auto* bth = reinterpret_cast<Bth*>(out.data());
  bth->opcode = fields.opcode;
  bth->se_m_pad_tver =
      static_cast<uint8_t>((fields.solicited ? kBthSolicited : 0) |
                           (fields.migreq ? kBthMigReq : 0) | (pad << kBthPadShift) | kBthTver);
  bth->pkey.set(fields.pkey);
  bth->fecn_becn_resv6 =
      static_cast<uint8_t>((fields.fecn ? kBthFecn : 0) | (fields.becn ? kBthBecn : 0));
  bth->dest_qp.set(fields.dest_qp);
  bth->ackreq_resv7 = fields.ack_req ? kBthAckReq : 0;
  bth->psn.set(fields.psn);
  TransferExtended(fields.opcode, out.data() + sizeof(Bth), &fields);
  if (!payload.empty()) std::memcpy(out.data() + header_bytes, payload.data(), payload.size());
  std::memset(out.data() + header_bytes + payload.size(), 0, pad);
  *error = WireError::kOk;
  return total;
}

WireError ParseTransport(std::span<const uint8_t> in, TransportFields* fields,
                         std::span<const uint8_t>* payload) {
  if (in.size() < sizeof(Bth)) return WireError::kTooShort;
  const auto* bth = reinterpret_cast<const Bth*>(in.data());
  if ((bth->se_m_pad_tver & kBthTverMask) != kBthTver) return WireError::kBadVersion;
  const uint8_t opcode = bth->opcode;
  const size_t header_bytes = TransportHeaderBytes(opcode);
  if (header_bytes == 0) return WireError::kBadOpcode;
  if (in.size() < header_bytes) return WireError::kTooShort;
  const size_t pad = (bth->se_m_pad_tver & kBthPadMask) >> kBthPadShift;
  const size_t rest = in.size() - header_bytes;
  if (!RowOf(opcode).payload && rest != 0) return WireError::kUnexpectedPayload;
  if (rest < pad) return WireError::kTooShort;
  *fields = TransportFields{};
  fields->opcode = opcode;
  fields->solicited = bth->se_m_pad_tver & kBthSolicited;
  fields->migreq = bth->se_m_pad_tver & kBthMigReq;
  fields->pkey = static_cast<uint16_t>(bth->pkey.get());
  fields->fecn = bth->fecn_becn_resv6 & kBthFecn;
  fields->becn = bth->fecn_becn_resv6 & kBthBecn;
  fields->dest_qp = static_cast<uint32_t>(bth->dest_qp.get());
  fields->ack_req = bth->ackreq_resv7 & kBthAckReq;
  fields->psn = static_cast<uint32_t>(bth->psn.get());
  TransferExtended(opcode, in.data() + sizeof(Bth), fields);
  *payload = in.subspan(header_bytes, rest - pad);
  return WireError::kOk;
}

}  // namespace softverbs::roce
