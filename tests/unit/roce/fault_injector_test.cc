// The RoCE fault injector (src/roce/fault_injector.h): its configuration
// syntax and errors, determinism for a seed, the requested fractions over a
// bounded number of packets, and what each fault does to the packet order.
#include "roce/fault_injector.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "roce/packet.h"

namespace softverbs::roce {
namespace {

FaultConfig Parse(const std::string& text) {
  FaultConfig c;
  std::string error;
  EXPECT_TRUE(ParseFaultConfig(text, &c, &error)) << text << ": " << error;
  return c;
}

std::string ErrorOf(const std::string& text) {
  FaultConfig c;
  std::string error;
  EXPECT_FALSE(ParseFaultConfig(text, &c, &error)) << text;
  return error;
}

TEST(RoceFaultConfig, Syntax) {
  const FaultConfig c = Parse("drop=0.01,reorder=0.01,dup=0.001,seed=42");
  EXPECT_EQ(c.drop, 0.01);
  EXPECT_EQ(c.reorder, 0.01);
  EXPECT_EQ(c.dup, 0.001);
  EXPECT_EQ(c.seed, 42u);
  EXPECT_EQ(c.delay, 0);
  EXPECT_EQ(c.delay_us, 1000u);
  EXPECT_TRUE(c.Any());
  const FaultConfig d = Parse("delay=0.5,delay_us=250,corrupt=1e-3,");
  EXPECT_EQ(d.delay, 0.5);
  EXPECT_EQ(d.delay_us, 250u);
  EXPECT_EQ(d.corrupt, 0.001);
  EXPECT_EQ(d.seed, 1u);
  EXPECT_FALSE(Parse("").Any());
  EXPECT_FALSE(Parse("seed=7").Any());
  EXPECT_TRUE(Parse("drop=1").Any());
}

TEST(RoceFaultConfig, ErrorsNameTheProblem) {
  EXPECT_EQ(ErrorOf("drop=1.5"), "drop=1.5: not a fraction between 0 and 1");
  EXPECT_EQ(ErrorOf("drop=-0.1"), "drop=-0.1: not a fraction between 0 and 1");
  EXPECT_EQ(ErrorOf("drop=nan"), "drop=nan: not a fraction between 0 and 1");
  EXPECT_EQ(ErrorOf("dup="), "dup=: not a fraction between 0 and 1");
  EXPECT_EQ(ErrorOf("dup=0.1x"), "dup=0.1x: not a fraction between 0 and 1");
  EXPECT_EQ(ErrorOf("seed=abc"), "seed=abc: not a non-negative integer");
  EXPECT_EQ(ErrorOf("seed=-1"), "seed=-1: not a non-negative integer");
  EXPECT_EQ(ErrorOf("delay_us=99999999999"), "delay_us=99999999999: not a non-negative integer");
  EXPECT_EQ(ErrorOf("drop"), "drop: expected key=value");
  EXPECT_EQ(ErrorOf("loss=0.1"),
            "loss: unknown key (drop, dup, reorder, delay, corrupt, delay_us, seed, cm_drop)");
  EXPECT_EQ(ErrorOf("cm_drop=lap"),
            "cm_drop: unknown CM message 'lap' (req, mra, rej, rep, rtu, dreq, drep, sidr_req, "
            "sidr_rep)");
  EXPECT_EQ(ErrorOf("cm_drop=rep:x"), "cm_drop=x: not a non-negative integer");
  EXPECT_EQ(ErrorOf("drop=0.1,drop=0.2"), "drop: given twice");
  EXPECT_NE(ErrorOf("drop=0.6,dup=0.5").find("add up to 1.1"), std::string::npos);
}

TEST(RoceFaultConfig, CmDropCountsTheFirstMadsOfEachKind) {
  FaultConfig c;
  std::string error;
  ASSERT_TRUE(ParseFaultConfig("cm_drop=rep+rtu:3,drop=0.1", &c, &error)) << error;
  EXPECT_EQ(c.cm_drop[0x13 - FaultConfig::kFirstCmAttr], 1u);  // REP
  EXPECT_EQ(c.cm_drop[0x14 - FaultConfig::kFirstCmAttr], 3u);  // RTU
  EXPECT_EQ(c.cm_drop[0x10 - FaultConfig::kFirstCmAttr], 0u);  // REQ
  EXPECT_DOUBLE_EQ(c.drop, 0.1);
}

TEST(RoceFaultConfig, FromTheEnvironment) {
  FaultConfig c;
  std::string error;
  unsetenv(kFaultsEnvironmentVariable);
  EXPECT_TRUE(FaultConfigFromEnvironment(&c, &error));
  EXPECT_FALSE(c.Any());
  setenv(kFaultsEnvironmentVariable, "drop=0.25,seed=9", 1);
  EXPECT_TRUE(FaultConfigFromEnvironment(&c, &error));
  EXPECT_EQ(c.drop, 0.25);
  EXPECT_EQ(c.seed, 9u);
  setenv(kFaultsEnvironmentVariable, "drop=2", 1);
  EXPECT_FALSE(FaultConfigFromEnvironment(&c, &error));
  EXPECT_EQ(error, "SOFTVERBS_ROCE_FAULTS: drop=2: not a fraction between 0 and 1");
  unsetenv(kFaultsEnvironmentVariable);
}

// A packet that says its number in its first 4 bytes (after which a BTH's
// worth of bytes and some payload).
std::vector<uint8_t> Numbered(uint32_t n) {
  std::vector<uint8_t> p(40, 0);
  std::memcpy(p.data(), &n, 4);
  return p;
}
uint32_t NumberOf(std::span<const uint8_t> p) {
  uint32_t n;
  std::memcpy(&n, p.data(), 4);
  return n;
}

// Runs n packets through an injector, 1 us apart, then flushes; returns
// the packet numbers in wire order (from the tags, which a corruption of the
// bytes does not touch; the bytes must say the same unless corrupted).
std::vector<uint32_t> Inject(const FaultConfig& config, uint32_t n,
                             FaultCounters* counters = nullptr) {
  FaultInjector injector(config);
  std::vector<uint32_t> wire;
  const auto sink = [&](std::span<const uint8_t> p, uint64_t tag) {
    const auto number = static_cast<uint32_t>(tag - 1000);
    if (config.corrupt == 0) {
      EXPECT_EQ(NumberOf(p), number);
    }
    wire.push_back(number);
  };
  for (uint32_t i = 0; i < n; ++i) injector.Submit(Numbered(i), i + 1000, i, sink);
  injector.Flush(sink);
  if (counters) *counters = injector.counters();
  return wire;
}

TEST(RoceFaultInjector, DeterministicForASeed) {
  const FaultConfig a = Parse("drop=0.05,dup=0.05,reorder=0.05,delay=0.05,delay_us=10,seed=42");
  const std::vector<uint32_t> first = Inject(a, 10000);
  EXPECT_EQ(Inject(a, 10000), first);
  FaultConfig b = a;
  b.seed = 43;
  EXPECT_NE(Inject(b, 10000), first);
  // Fates depend on the packet number only, not on timing.
  FaultInjector x(a), y(a);
  for (uint64_t i = 0; i < 1000; ++i) EXPECT_EQ(x.FateOf(i), y.FateOf(i));
}

TEST(RoceFaultInjector, FractionsWithinTolerance) {
  // 200,000 packets: a fraction p is hit 200000 p +- 5 standard deviations
  // (sqrt(200000 p (1 - p))); the counts are fixed by the seed, the bound
  // says the generator is not biased.
  constexpr uint32_t kPackets = 200000;
  for (uint64_t seed : {1, 42, 1234567}) {
    FaultConfig c = Parse("drop=0.01,dup=0.001,reorder=0.01,delay=0.02,corrupt=0.005");
    c.seed = seed;
    FaultCounters counters;
    const std::vector<uint32_t> wire = Inject(c, kPackets, &counters);
    const auto within = [&](uint64_t count, double p) {
      const double mean = kPackets * p, sd = std::sqrt(kPackets * p * (1 - p));
      EXPECT_NEAR(static_cast<double>(count), mean, 5 * sd) << "p " << p << " seed " << seed;
    };
    std::printf(
        "seed %llu of %u: dropped %llu dup %llu reordered %llu delayed %llu corrupted %llu\n",
        static_cast<unsigned long long>(seed), kPackets,
        static_cast<unsigned long long>(counters.dropped),
        static_cast<unsigned long long>(counters.duplicated),
        static_cast<unsigned long long>(counters.reordered),
        static_cast<unsigned long long>(counters.delayed),
        static_cast<unsigned long long>(counters.corrupted));
    within(counters.dropped, 0.01);
    within(counters.duplicated, 0.001);
    within(counters.reordered, 0.01);
    within(counters.delayed, 0.02);
    within(counters.corrupted, 0.005);
    EXPECT_EQ(counters.submitted, kPackets);
    EXPECT_EQ(counters.sent, kPackets - counters.dropped + counters.duplicated);
    EXPECT_EQ(wire.size(), counters.sent);
  }
}

TEST(RoceFaultInjector, WhatEachFaultDoes) {
  // Only one fault at a time, on every packet.
  EXPECT_TRUE(Inject(Parse("drop=1"), 5).empty());
  EXPECT_EQ(Inject(Parse("dup=1"), 3), (std::vector<uint32_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(Inject(Parse(""), 3), (std::vector<uint32_t>{0, 1, 2}));

  // Reorder: the held packet goes right after the next one.
  FaultConfig c = Parse("reorder=0.3,seed=5");
  FaultInjector injector(c);
  std::vector<uint32_t> wire;
  const auto sink = [&](std::span<const uint8_t> p, uint64_t tag) {
    EXPECT_EQ(tag, NumberOf(p) + 1000u);
    wire.push_back(NumberOf(p));
  };
  uint32_t i = 0;
  while (injector.FateOf(i) != Fate::kReorder || injector.FateOf(i + 1) != Fate::kPass) ++i;
  for (uint32_t k = 0; k <= i + 1; ++k) injector.Submit(Numbered(k), k + 1000, 0, sink);
  ASSERT_GE(wire.size(), 2u);
  EXPECT_EQ(wire[wire.size() - 2], i + 1);
  EXPECT_EQ(wire.back(), i);

  // Delay: held for delay_us; Poll says when and releases it then.
  FaultInjector delayer(Parse("delay=1,delay_us=100"));
  wire.clear();
  delayer.Submit(Numbered(7), 1007, 1000, sink);
  EXPECT_TRUE(wire.empty());
  EXPECT_EQ(delayer.Poll(1099, sink), 1100u);
  EXPECT_TRUE(wire.empty());
  EXPECT_EQ(delayer.Poll(1100, sink), UINT64_MAX);
  EXPECT_EQ(wire, std::vector<uint32_t>{7});

  // A packet held for reordering with nothing after it goes after delay_us.
  FaultInjector lone(Parse("reorder=1,delay_us=50"));
  wire.clear();
  lone.Submit(Numbered(3), 1003, 0, sink);
  EXPECT_EQ(lone.Poll(49, sink), 50u);
  lone.Poll(50, sink);
  EXPECT_EQ(wire, std::vector<uint32_t>{3});
}

TEST(RoceFaultInjector, CorruptionIsCaughtByTheIcrc) {
  // Every corrupted RoCE packet differs in exactly one bit, and the
  // receiver's parser refuses it as a bad ICRC.
  Endpoints ends;
  ends.src[0] = 198, ends.src[1] = 51, ends.src[2] = 100, ends.src[3] = 1;
  ends.dst[0] = 198, ends.dst[1] = 51, ends.dst[2] = 100, ends.dst[3] = 2;
  ends.src_port = 0xc001;
  TransportFields f;
  f.opcode = 0x0a;  // RC RDMA_WRITE_ONLY
  f.dest_qp = 0x12;
  f.va = 0x1000;
  f.rkey = 0x77;
  f.dma_len = 64;
  const std::vector<uint8_t> payload(64, 0x5a);
  std::vector<uint8_t> full(256);
  WireError error;
  full.resize(BuildPacket(ends, f, payload, full, &error));
  const size_t head = IpUdpBytes(false);
  const std::vector<uint8_t> roce(full.begin() + head, full.end());

  FaultInjector injector(Parse("corrupt=1,seed=3"));
  int checked = 0;
  for (uint32_t i = 0; i < 2000; ++i) {
    injector.Submit(roce, 0, i, [&](std::span<const uint8_t> p, uint64_t) {
      int bits = 0;
      for (size_t k = 0; k < p.size(); ++k) bits += __builtin_popcount(p[k] ^ roce[k]);
      EXPECT_EQ(bits, 1);
      TransportFields out;
      std::span<const uint8_t> body;
      const WireError e = ParseRoce(std::span(full).first(head), p, &out, &body);
      // A flip in the opcode or TVer may be refused for that first.
      EXPECT_TRUE(e == WireError::kBadIcrc || e == WireError::kBadOpcode ||
                  e == WireError::kBadVersion || e == WireError::kUnexpectedPayload ||
                  e == WireError::kTooShort)
          << WireErrorName(e);
      ++checked;
    });
  }
  EXPECT_EQ(checked, 2000);
  EXPECT_EQ(injector.counters().corrupted, 2000u);
}

}  // namespace
}  // namespace softverbs::roce
