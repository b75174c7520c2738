// Dispatch of the data-path ops: the requests initiators make on a cache
// miss or an error, never per work request.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "daemon/server.h"

namespace softverbs::daemon {

using protocol::Op;

bool Server::DispatchDatapath(Connection& conn, const protocol::RequestHeader& hdr,
                              const uint8_t* body, size_t len, std::vector<int>& fds) {
  const ClientId c = conn.client;
  auto bad_size = [&] {
    Reply(conn, hdr.seq, Verdict::Fail(EPROTO, "malformed request body"), nullptr, 0);
    return true;
  };
  switch (static_cast<Op>(hdr.op)) {
    case Op::kRegMrBacked: {
      protocol::RegMrBackedRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      int backing = -1;
      // A memfd comes as the request's fd; a SysV segment by its id, a memfd
      // the device kept for this connection by its name.
      if (req.backed_end > req.backed_begin && req.backing_kind == protocol::kBackingNone) {
        if (fds.empty()) {
          Reply(conn, hdr.seq, Verdict::Fail(EBADF, "reg_mr: backing memfd missing"), nullptr, 0);
          return true;
        }
        backing = fds[0];  // borrowed: the device holds its own
      }
      if (req.backing_kind == protocol::kBackingMemfdKept &&
          !device_.KeepsBackingFor(c, req.kept)) {
        TakePendingOffers(conn);  // its offer may still wait on the socket
      }
      protocol::RegMrReply out{};
      Verdict v = device_.RegMrBacked(c, req, backing, &out);
      Reply(conn, hdr.seq, v, &out, sizeof(out));
      return true;
    }
    case Op::kForgetBackings: {
      protocol::ForgetBackingsRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      if (req.count > protocol::ForgetBackingsRequest::kMaxNames) {
        Reply(conn, hdr.seq,
              Verdict::Fail(EINVAL, "forget_backings: " + std::to_string(req.count) +
                                        " names, at most " +
                                        std::to_string(protocol::ForgetBackingsRequest::kMaxNames)),
              nullptr, 0);
        return true;
      }
      device_.ForgetBackings(c, std::span(req.names, req.count));
      Reply(conn, hdr.seq, Verdict::Ok(), nullptr, 0);
      return true;
    }
    case Op::kMapQp: {
      protocol::MapQpRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      protocol::MapQpReply out{};
      std::vector<int> out_fds;
      Verdict v = device_.MapQp(c, req.qpn, &out, &out_fds);
      Reply(conn, hdr.seq, v, &out, sizeof(out), out_fds);
      return true;
    }
    case Op::kMapMr: {
      protocol::MapMrRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      protocol::MapMrReply out{};
      std::vector<int> out_fds;
      Verdict v = device_.MapMr(c, req.key, &out, &out_fds);
      Reply(conn, hdr.seq, v, &out, sizeof(out), out_fds);
      return true;
    }
    case Op::kMrPeersInside: {
      protocol::MrPeersInsideRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      protocol::MrPeersInsideReply out{device_.MrPeersInside(req.key), 0};
      Reply(conn, hdr.seq, Verdict::Ok(), &out, sizeof(out));
      return true;
    }
    case Op::kQpError: {
      protocol::QpErrorRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      Reply(conn, hdr.seq, device_.QpError(c, req.qpn, req.state), nullptr, 0);
      return true;
    }
    case Op::kSrqLimitReached: {
      protocol::SrqLimitRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      Reply(conn, hdr.seq, device_.SrqLimitReached(c, req.srqn), nullptr, 0);
      return true;
    }
    case Op::kMcastMembers: {
      protocol::McastMembersRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      std::vector<uint32_t> qpns;
      Verdict v = device_.McastMembers(c, req.gid, &qpns);
      Reply(conn, hdr.seq, v, qpns.data(), qpns.size() * sizeof(uint32_t));
      return true;
    }
    case Op::kFlowRules: {
      protocol::FlowRulesRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      protocol::FlowRulesReply head{};
      std::vector<verbs::SteeredFlow> rules;
      Verdict v = device_.FlowRules(c, req, &head, &rules);
      std::vector<uint8_t> out(sizeof(head) + rules.size() * sizeof(verbs::SteeredFlow));
      memcpy(out.data(), &head, sizeof(head));
      if (!rules.empty())
        memcpy(out.data() + sizeof(head), rules.data(), out.size() - sizeof(head));
      Reply(conn, hdr.seq, v, out.data(), out.size());
      return true;
    }
    case Op::kRssTable: {
      protocol::RssTableRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      protocol::RssTableReply out{};
      Verdict v = device_.RssTable(c, req.qpn, &out);
      Reply(conn, hdr.seq, v, &out, sizeof(out));
      return true;
    }
    case Op::kMapSrq: {
      protocol::MapSrqRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      protocol::MapSrqReply out{};
      std::vector<int> out_fds;
      Verdict v = device_.MapSrq(c, req.srqn, &out, &out_fds);
      Reply(conn, hdr.seq, v, &out, sizeof(out), out_fds);
      return true;
    }
    case Op::kDevxQueueFiles: {
      protocol::DevxQueueFilesRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      protocol::DevxQueueFilesReply out{};
      std::vector<int> out_fds;
      Verdict v = device_.DevxQueueFiles(c, req, &out, &out_fds);
      Reply(conn, hdr.seq, v, &out, sizeof(out), out_fds);
      return true;
    }
    case Op::kQpEvent: {
      protocol::QpEventRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      Reply(conn, hdr.seq, device_.RaiseQpEvent(c, req.qpn, req.event_type), nullptr, 0);
      return true;
    }
    case Op::kAllocDm: {
      protocol::AllocDmRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      protocol::AllocDmReply out{};
      Verdict v = device_.AllocDm(c, req, &out);
      Reply(conn, hdr.seq, v, &out, sizeof(out));
      return true;
    }
    case Op::kRegDmMr: {
      protocol::RegDmMrRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      int backing = -1;
      if (req.mr.backed_end > req.mr.backed_begin) {
        if (fds.empty()) {
          Reply(conn, hdr.seq, Verdict::Fail(EBADF, "reg_dm_mr: backing memfd missing"), nullptr,
                0);
          return true;
        }
        backing = fds[0];  // borrowed: the device holds its own
      }
      protocol::RegMrReply out{};
      Verdict v = device_.RegDmMr(c, req, backing, &out);
      Reply(conn, hdr.seq, v, &out, sizeof(out));
      return true;
    }
    case Op::kFreeDm: {
      protocol::HandleRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      Reply(conn, hdr.seq, device_.FreeDm(c, req.handle), nullptr, 0);
      return true;
    }
    case Op::kWireDoorbell: {
      protocol::WireDoorbellRequest req;
      if (!ReadBody(body, len, &req)) return bad_size();
      if (fds.size() != 2) {
        Reply(conn, hdr.seq,
              Verdict::Fail(EBADF, "wire_doorbell: expected two descriptors (socket, ring)"),
              nullptr, 0);
        return true;
      }
      Reply(conn, hdr.seq,
            wire_.AddDoorbell(c, fcntl(fds[0], F_DUPFD_CLOEXEC, 0),
                              fcntl(fds[1], F_DUPFD_CLOEXEC, 0)),
            nullptr, 0);
      return true;
    }
    default:
      return false;
  }
}

}  // namespace softverbs::daemon
