// Shared helpers of the integration clients: opening softverbs0, asking the
// daemon for its view (`softverbs status --json`), and small RAII wrappers.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <nlohmann/json.hpp>
#include <string>

namespace softverbs::it {

// Opens the first (only) device; fails the test if there is none.
ibv_context* OpenDevice();

// `softverbs status --json` of the daemon this process talks to.
nlohmann::json Status();

// The client entries of this process (one per open context).
nlohmann::json MyClients();

// Number of objects of `kind` ("pd", "mr", "cq", "srq", "qp", "ah", "xrcd")
// this process owns, summed over its contexts.
size_t MyObjectCount(const std::string& kind);

// Index of a RoCE v2 GID in port 1's table, or -1.
int RoceV2GidIndex(ibv_context* ctx);

// A valid RoCE address vector (GRH to our own RoCE v2 GID).
ibv_ah_attr LoopbackAh(ibv_context* ctx);

// Takes an RC QP of ctx from RESET to RTS, connected to dest_qpn on this
// device (remote read/write allowed); returns false on the first failing step.
bool ConnectRc(ibv_context* ctx, ibv_qp* qp, uint32_t dest_qpn);

// Polls cq until one completion arrives (bounded); returns how many (0 or 1).
int PollOne(ibv_cq* cq, ibv_wc* wc);

// Whether the page at p maps a registration backing (a memfd of softverbs',
// "softverbs-mr"), read from /proc/self/maps.
bool PageIsBacked(const void* p);

// The descriptors this process has open (/proc/self/fd, its own included).
int OpenDescriptors();

// Runs `cmd` through the shell; returns its stdout (exit status in *status).
std::string RunCommand(const std::string& cmd, int* status = nullptr);

// A fixture with an open context, a PD and a CQ, closed in order.
class ContextTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
};

}  // namespace softverbs::it
