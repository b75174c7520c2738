// How the device's network transport (wire_service.h) reaches the memory,
// receive queues and CQ rings of its clients: through the same files peers
// map (map_qp / map_mr / map_srq hand them out), mapped once into the
// daemon and kept while the object lives. Entries are checked against the
// generation in the device table, so a reused QP number or key is mapped
// afresh; an MR's mapping goes when the MR does (ForgetMr), a QP's when the
// QP does (ForgetQp). Single-threaded, as the daemon is.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "datapath/cq_ring.h"
#include "datapath/device_table.h"
#include "datapath/engine.h"
#include "datapath/shm.h"

namespace softverbs::daemon {

class Device;

class WireMemory {
 public:
  explicit WireMemory(Device& device) : device_(device) {}

  const datapath::DeviceTable& table() const;
  // QP qpn's receive side (its RQ or SRQ and its receive CQ), or nullptr.
  datapath::PeerQp* FindPeerQp(uint32_t qpn, uint32_t generation);
  // XRC SRQ srqn's receive side, or nullptr.
  datapath::PeerQp* FindXrcSrq(uint32_t srqn);
  // How to reach the MR in slot e (key just checked), or nullptr.
  const datapath::MrMapping* FindMrMapping(uint32_t key, const datapath::MrEntry& e);
  // QP qpn's send CQ, or false.
  bool SendCq(uint32_t qpn, datapath::CqRing** ring, int* event_fd);

  void ForgetMr(uint32_t key);
  void ForgetQp(uint32_t qpn);

 private:
  struct RingFiles {
    datapath::PeerQp peer;  // for a send CQ only peer.recv_cq is used
    datapath::SharedMapping rq_mapping;
    datapath::SharedMapping cq_mapping;
    int event_fd = -1;  // a dup: the device may close its own
    RingFiles() = default;
    RingFiles(const RingFiles&) = delete;
    RingFiles& operator=(const RingFiles&) = delete;
    ~RingFiles();
  };
  struct MrFiles {
    datapath::MrMapping mapping;
    datapath::SharedMapping backing;
    int mem_fd = -1;  // a dup of the owner's /proc/<pid>/mem
    MrFiles() = default;
    MrFiles(const MrFiles&) = delete;
    MrFiles& operator=(const MrFiles&) = delete;
    ~MrFiles();
  };
  // Maps a map_qp / map_srq answer: fds[0] the receive queue, fds[1] the
  // CQ ring, fds[2] (optional) its eventfd. The fds stay the device's.
  static std::unique_ptr<RingFiles> MapReceiveSide(const std::vector<int>& fds, bool event_fd);

  Device& device_;
  std::map<uint32_t, std::unique_ptr<RingFiles>> qps_;       // by QP number
  std::map<uint32_t, std::unique_ptr<RingFiles>> xrc_srqs_;  // by SRQ number
  std::map<uint32_t, std::unique_ptr<RingFiles>> send_cqs_;  // by QP number
  std::map<uint32_t, uint32_t> send_cq_generation_;          // by QP number
  std::map<uint32_t, std::unique_ptr<MrFiles>> mrs_;         // by key
};

}  // namespace softverbs::daemon
