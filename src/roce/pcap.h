// A minimal pcap file writer (the classic libpcap format, microsecond
// stamps, link type RAW: each record is an IPv4 or IPv6 packet), so that
// independent tools (tshark, scapy) can read the packets softverbs builds.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace softverbs::roce {

class PcapWriter {
 public:
  PcapWriter() = default;
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // Creates (truncates) the file and writes the global header. False with
  // errno on failure.
  bool Open(const std::string& path);
  // Appends one IP packet stamped at usec microseconds after the epoch.
  bool Write(std::span<const uint8_t> ip_packet, uint64_t usec);
  // Flushes and closes; false if anything failed to reach the file.
  bool Close();

 private:
  std::FILE* file_ = nullptr;
  bool ok_ = true;
};

}  // namespace softverbs::roce
