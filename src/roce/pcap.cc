#include "roce/pcap.h"

namespace softverbs::roce {
namespace {

// pcap's file header and record header, in the writer's byte order (the
// magic tells the reader which).
struct FileHeader {
  uint32_t magic = 0xa1b2c3d4;  // microsecond stamps
  uint16_t version_major = 2;
  uint16_t version_minor = 4;
  int32_t thiszone = 0;
  uint32_t sigfigs = 0;
  uint32_t snaplen = 65535;
  uint32_t linktype = 101;  // LINKTYPE_RAW: the record starts with the IP header
};
static_assert(sizeof(FileHeader) == 24);

struct RecordHeader {
  uint32_t ts_sec;
  uint32_t ts_usec;
  uint32_t incl_len;
  uint32_t orig_len;
};
static_assert(sizeof(RecordHeader) == 16);

}  // namespace

PcapWriter::~PcapWriter() {
  Close();
}

bool PcapWriter::Open(const std::string& path) {
  Close();
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) return false;
  const FileHeader header;
  ok_ = std::fwrite(&header, sizeof(header), 1, file_) == 1;
  return ok_;
}

bool PcapWriter::Write(std::span<const uint8_t> ip_packet, uint64_t usec) {
  if (!file_) return false;
  const auto len = static_cast<uint32_t>(ip_packet.size());
  const RecordHeader record{static_cast<uint32_t>(usec / 1000000),
                            static_cast<uint32_t>(usec % 1000000), len, len};
  ok_ = ok_ && std::fwrite(&record, sizeof(record), 1, file_) == 1 &&
        std::fwrite(ip_packet.data(), 1, ip_packet.size(), file_) == ip_packet.size();
  return ok_;
}

bool PcapWriter::Close() {
  if (!file_) return ok_;
  ok_ = (std::fclose(file_) == 0) && ok_;
  file_ = nullptr;
  return ok_;
}

}  // namespace softverbs::roce
