// The packets the RoCE wire tests send, over IPv4 and then IPv6: every
// opcode of the opcode table, each frame's fields distinct values derived
// from its number (its PSN is 0x1000 + number), so that a dissector reading
// a header at the wrong offset shows; then RC messages of 2.5 KiB cut into
// 1 KiB packets (SEND, SEND with immediate / invalidate, WRITE, WRITE with
// immediate, a READ response) as segment.h cuts them. Written as a table (TSV) for the
// independent checkers (check_tshark.py, check_icrc_scapy.py).
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "roce/transport.h"

namespace softverbs::roce::test {

struct TestFrame {
  uint32_t number;  // 1, 2, ...
  bool ipv6;
  TransportFields fields;
  std::vector<uint8_t> payload;
};

std::vector<TestFrame> AllTestFrames();

// The UDP source port a frame goes from (its DETH/"source" QP's flow port).
uint16_t SourcePortOf(const TestFrame& frame);

// Writes the table; false on a write error.
bool WriteTestFrames(std::FILE* tsv, const std::vector<TestFrame>& frames);

}  // namespace softverbs::roce::test
