#include "datapath/ud_receive.h"

#include <cstring>

#include "common/gid_table.h"
#include "roce/headers.h"
#include "roce/ip_udp.h"

namespace softverbs::datapath {

bool UdMessageIsIpv6(const uint8_t sgid[16], const uint8_t dgid[16]) {
  return !(IsIpv4Gid(sgid) && IsIpv4Gid(dgid));
}

bool WriteUdReceiveGrh(const uint8_t sgid[16], const uint8_t dgid[16],
                       const roce::PathIpFields& path, uint32_t payload_bytes, bool with_immediate,
                       uint8_t grh[40]) {
  roce::Endpoints ends;
  ends.traffic_class = path.traffic_class;
  ends.hop_limit = path.hop_limit;
  ends.ipv6 = UdMessageIsIpv6(sgid, dgid);
  if (ends.ipv6) {
    std::memcpy(ends.src, sgid, 16);
    std::memcpy(ends.dst, dgid, 16);
  } else {
    std::memcpy(ends.src, sgid + 12, 4);
    std::memcpy(ends.dst, dgid + 12, 4);
  }
  // The packet after its UDP header: BTH, DETH, the immediate, the payload
  // padded to 4 bytes, the ICRC.
  const size_t pad = (4 - payload_bytes % 4) % 4;
  const size_t roce_bytes = sizeof(roce::Bth) + sizeof(roce::Deth) +
                            (with_immediate ? sizeof(roce::ImmDt) : 0) + payload_bytes + pad +
                            roce::kIcrcBytes;
  roce::WriteGrh(ends, roce_bytes, grh);
  return ends.ipv6;
}

}  // namespace softverbs::datapath
