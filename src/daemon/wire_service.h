// The device's network transport (docs/roce.md, "The network transport"):
// softverbsd runs the RoCE v2 requester, completer and responder
// (datapath/wire_qp.h) of every QP whose path leaves the host, and of every
// UD QP, over UDP carriers bound to port 4791 of the port's addresses - as
// a NIC serves its queues while the application does something else.
//
//   - Contexts post such QPs' work requests into a doorbell ring they share
//     with the device, and wake it through a doorbell socket when it
//     sleeps (protocol kWireDoorbell; wire_doorbell.cc); completions go to
//     the QP's CQ rings.
//   - Packets that arrive are dispatched by destination QP number.
//   - The device tells the service when a QP's attributes change
//     (NoteQpChanged); the change is applied after the request that made
//     it (ApplyChanges), never in the middle of a transport step.
//
// The daemon reaches memory, rings and keys as a peer process does
// (wire_memory.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "daemon/objects.h"
#include "daemon/verdict.h"
#include "daemon/wire_memory.h"
#include "datapath/shm.h"
#include "datapath/wire_post.h"
#include "datapath/wire_qp.h"
#include "roce/udp_carrier.h"

namespace softverbs::daemon {

class Device;

class WireService : public datapath::WireHost {
 public:
  // watch(fd, true) adds fd to the daemon's epoll set (readable), watch(fd,
  // false) removes it.
  using WatchFd = std::function<void(int fd, bool add)>;
  WireService(Device& device, WatchFd watch);
  ~WireService() override;
  WireService(const WireService&) = delete;
  WireService& operator=(const WireService&) = delete;

  // Whether multicast groups span hosts: SOFTVERBS_ROCE_MCAST=link (the
  // default) or host (groups stay on this host: for machines whose
  // interfaces lead to networks that must not see test traffic).
  // The GIDs (bit i: index i) from which a multicast send goes on the link:
  // those with a carrier when groups span hosts (told at hello). A device
  // without carriers (another device holds UDP 4791 on its addresses) keeps
  // its groups on the host.
  uint32_t MulticastGids();

  // A readable descriptor of the service (a carrier or a doorbell).
  bool Owns(int fd) const;
  void OnReadable(int fd);

  // A context's doorbell: its socket and its ring's memfd (takes ownership
  // of both; the ring must be sealed against shrinking and of the ring's
  // exact size).
  Verdict AddDoorbell(ClientId c, int socket_fd, int ring_fd);
  void RemoveClient(ClientId c);
  // Before the daemon sleeps: tells every ring the device is going to
  // sleep, then looks once more. True when a ring has posts (do not sleep).
  bool ArmDoorbells();
  // Once a round, after the round's QP changes are applied (so a post made
  // after a modify to RTS finds the QP in RTS): takes what the rings hold.
  // Returns how many posts it took.
  uint32_t TakeRingPosts();
  // Before a control request is handled: takes every post the rings hold,
  // beyond the round's budget, so that the WRs a context posted before it
  // asked for a change start in the state they were posted in (a send rung
  // before RTS->SQD is one the drain waits for, IBA 10.3.1).
  void TakeEveryRingPost();

  // The device changed QP qpn (attributes, state, destroyed).
  void NoteQpChanged(uint32_t qpn) { changed_.insert(qpn); }
  void ApplyChanges();
  // An MR is gone: its mapping is dropped.
  void NoteMrGone(uint32_t key) { memory_.ForgetMr(key); }

  // Microseconds until the next transport timer (-1: none; at most 1 s):
  // RNR waits of 10 us, kept packets retried every 100 us (wire_qp.h).
  int64_t UsUntilNextTimer();
  void RunTimers();
  // Sends the packets the carriers gathered this round (UdpCarrier::Send).
  void FlushSends();

  // `softverbs status`: carriers and each network QP's state and counters.
  std::string StatusJson() const;

  // datapath::WireHost
  uint32_t client_id() const override { return 0; }
  // The device: its event loop serves every request that changes a key
  // (dereg, invalidate, a client's death) between the packets it handles.
  bool ChangesKeysBetweenAccesses() const override { return true; }
  const datapath::DeviceTable& table() const override { return memory_.table(); }
  datapath::PeerQp* FindPeerQp(uint32_t qpn, uint32_t generation) override {
    return memory_.FindPeerQp(qpn, generation);
  }
  const datapath::MrMapping* FindMrMapping(uint32_t key, const datapath::MrEntry& e) override {
    return memory_.FindMrMapping(key, e);
  }
  datapath::PeerQp* FindXrcSrq(uint32_t srqn) override { return memory_.FindXrcSrq(srqn); }
  void SetQpError(uint32_t qpn) override;
  void SetSendQueueError(uint32_t qpn) override;
  void SrqLimitReached(uint32_t srqn) override;
  void RaiseQpEvent(uint32_t qpn, ibv_event_type event) override;
  void ReportSigError(uint32_t key, const datapath::SigError& err) override;
  void DrainOnSigError(uint32_t qpn) override;
  // mlx5dv_qp_cancel_posted_send_wrs of a QP served here, by its creator's
  // group: how many WRs (0 for a QP not served here).
  int CancelSends(uint32_t client, uint32_t qpn, uint64_t wr_id);
  // QP1, the general services interface: CM MADs (daemon/cm_wire.h). The
  // sink gets each MAD that arrives (UD SEND Only to QP1 with the GSI
  // Q_Key) with the packet's source GID and the carrier's GID.
  // traffic_class: the packet's (its IP header's TOS / traffic class).
  using GsiSink = std::function<void(const uint8_t sgid[16], const uint8_t dgid[16],
                                     uint8_t traffic_class, std::span<const uint8_t> mad)>;
  void set_gsi_sink(GsiSink sink) { gsi_sink_ = std::move(sink); }
  // Opens the UDP 4791 carriers on the port's RoCE v2 addresses (once):
  // when the first network QP appears, or the CM needs QP1 (a listener, a
  // MAD to send).
  void OpenCarriers();
  // Sends one MAD from QP1 at sgid to QP1 at dgid, with the connection's
  // traffic class.
  void SendGsi(const uint8_t sgid[16], const uint8_t dgid[16], uint8_t traffic_class,
               std::span<const uint8_t> mad);
  void McastMembers(const uint8_t gid[16], std::vector<uint32_t>* qpns) override;
  datapath::VendorError BindWindow(const datapath::LocalQp& qp,
                                   const datapath::SendWr& wr) override;
  datapath::VendorError ConfigureMkey(const datapath::LocalQp& qp,
                                      const datapath::SendWr& wr) override;
  bool InvalidateWindow(uint32_t qpn, uint32_t rkey, bool remote) override;
  void SendPacket(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t src_port,
                  const roce::PathIpFields& path, const roce::TransportFields& fields,
                  std::span<const uint8_t> payload) override;
  bool SendCq(uint32_t qpn, datapath::CqRing** ring, int* event_fd) override {
    return memory_.SendCq(qpn, ring, event_fd);
  }
  uint64_t Now() override;
  void SendWrsRetired(uint32_t qpn, uint32_t n) override;

 private:
  struct Carrier {
    std::array<uint8_t, 16> gid{};
    roce::UdpCarrier udp;
  };
  struct NetworkQp {
    std::unique_ptr<datapath::WireQp> wire;
    ClientId owner = 0;
    ibv_qp_state state = IBV_QPS_RESET;
    bool drain_notify = false;  // RTS->SQD asked for IBV_EVENT_SQ_DRAINED
  };
  // Raises IBV_EVENT_SQ_DRAINED for the QPs in SQD whose send queue drained.
  void CheckDrains();
  // Opens a carrier on every address of the port's GID table (once).
  void ReadCarrier(Carrier& c);
  void ReceiveGsi(Carrier& c, const roce::ReceivedPacket& packet);
  struct Doorbell {
    ClientId client = 0;
    datapath::SharedMapping ring_map;
    datapath::WirePostRing* ring = nullptr;
    uint32_t consumed = 0;  // records taken (the ring's own count is not trusted)
  };
  // The socket is readable: wake-up bytes, or the context closed it.
  void ReadDoorbell(int fd);
  // Takes up to a round's share of d's ring, adding the count to *taken.
  // False: the ring is broken (explained on the log channel) and the
  // doorbell must close.
  bool TakeRing(Doorbell& d, uint32_t* taken);
  // One record: checked, then run or flushed.
  void TakePost(ClientId c, const datapath::WirePostRecord& rec);
  void CloseDoorbell(int fd);
  void ApplyChange(uint32_t qpn);
  // Whether QP qp is served here, and its transport configuration.
  bool ServedHere(const Qp& qp) const;
  datapath::WireQpConfig ConfigOf(const Qp& qp) const;
  Carrier* CarrierFor(const uint8_t gid[16]);
  // Multicast (docs/roce.md, "Multicast"): a socket on UDP 4791 of each
  // group a served UD QP is attached to, joined on the port's interface;
  // what it receives goes to every attached QP.
  void SyncGroups();
  bool JoinGroup(const std::array<uint8_t, 16>& mgid, Carrier* c);
  void DeliverToGroup(const datapath::WirePacket& p, std::vector<datapath::WireQp*>* touched);

  Device& device_;
  WatchFd watch_;
  WireMemory memory_;
  bool carriers_opened_ = false;
  std::vector<std::unique_ptr<Carrier>> carriers_;
  std::map<std::array<uint8_t, 16>, std::unique_ptr<Carrier>> groups_;  // by MGID
  bool multicast_on_link_ = true;
  uint64_t group_errors_ = 0;                // groups that could not be joined
  uint64_t multicast_received_ = 0;          // packets that came to a group's socket
  std::vector<std::string> carrier_errors_;  // addresses that could not be bound, and why
  std::map<int, std::unique_ptr<Doorbell>> doorbells_;  // by socket fd
  datapath::WirePostRecord taken_{};                    // TakeRing's copy of a slot
  std::map<uint32_t, NetworkQp> qps_;                   // by QP number
  std::set<uint32_t> changed_;
  // Counters of the QPs served so far, those gone included.
  datapath::WireCounters totals_;
  void EraseQp(std::map<uint32_t, NetworkQp>::iterator it);
  uint64_t unroutable_ = 0;  // packets for a QP number not served here
  GsiSink gsi_sink_;
  uint32_t gsi_psn_ = 0;    // QP1's send PSN
  uint64_t mads_sent_ = 0;  // CM MADs sent and received on QP1
  uint64_t mads_received_ = 0;
  uint64_t send_failures_ = 0;                              // packets no carrier could send
  std::set<std::array<uint8_t, 16>> gids_without_carrier_;  // said once on the log
  uint64_t bad_posts_ = 0;                                  // doorbell records refused
};

}  // namespace softverbs::daemon
