// rdma_getaddrinfo / rdma_freeaddrinfo: getaddrinfo(3) with the RDMA hints
// translated (QP type <-> socket type, port space <-> protocol), one result,
// as librdmacm answers without ibacm. AF_IB addresses are not supported.
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "abi/rdmacm/cm_internal.h"

using namespace softverbs::rdmacm;

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

addrinfo HintsFor(const rdma_addrinfo& rai) {
  addrinfo ai{};
  if (rai.ai_flags & RAI_PASSIVE) ai.ai_flags |= AI_PASSIVE;
  if (rai.ai_flags & RAI_NUMERICHOST) ai.ai_flags |= AI_NUMERICHOST;
  ai.ai_family = rai.ai_family;
  if (rai.ai_qp_type == IBV_QPT_UD) {
    ai.ai_socktype = SOCK_DGRAM;
  } else if (rai.ai_qp_type) {
    ai.ai_socktype = SOCK_STREAM;
  }
  if (rai.ai_port_space == RDMA_PS_TCP) {
    ai.ai_protocol = IPPROTO_TCP;
  } else if (rai.ai_port_space == RDMA_PS_UDP || rai.ai_port_space == RDMA_PS_IPOIB) {
    ai.ai_protocol = IPPROTO_UDP;
  } else if (rai.ai_port_space == RDMA_PS_IB && ai.ai_socktype) {
    ai.ai_protocol = ai.ai_socktype == SOCK_STREAM ? IPPROTO_TCP : IPPROTO_UDP;
  }
  return ai;
}

bool CopyAddr(sockaddr** dst, socklen_t* dst_len, const sockaddr* src, socklen_t len) {
  *dst = static_cast<sockaddr*>(malloc(len));
  if (!*dst) return false;
  memcpy(*dst, src, len);
  *dst_len = len;
  return true;
}

// The first answer of getaddrinfo as the rdma_addrinfo result.
int FromAddrinfo(rdma_addrinfo* rai, const rdma_addrinfo& hints, const addrinfo* ai) {
  rai->ai_qp_type = hints.ai_qp_type ? hints.ai_qp_type
                                     : (ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD : IBV_QPT_RC);
  if (hints.ai_port_space) {
    rai->ai_port_space = hints.ai_port_space;
  } else {
    rai->ai_port_space = ai->ai_protocol == IPPROTO_UDP ? RDMA_PS_UDP : RDMA_PS_TCP;
  }
  rai->ai_family = ai->ai_family;
  const bool passive = ai->ai_flags & AI_PASSIVE;
  if (passive) rai->ai_flags = RAI_PASSIVE;
  char** canon = passive ? &rai->ai_src_canonname : &rai->ai_dst_canonname;
  if (ai->ai_canonname) *canon = strdup(ai->ai_canonname);
  bool ok = passive ? CopyAddr(&rai->ai_src_addr, &rai->ai_src_len, ai->ai_addr, ai->ai_addrlen)
                    : CopyAddr(&rai->ai_dst_addr, &rai->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
  return ok ? 0 : ENOMEM;
}

}  // namespace

SV_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    free(res->ai_connect);
    free(res->ai_route);
    free(res->ai_src_canonname);
    free(res->ai_dst_canonname);
    free(res->ai_src_addr);
    free(res->ai_dst_addr);
    free(res);
    res = next;
  }
}

SV_EXPORT int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                               rdma_addrinfo** res) {
  if (!node && !service && !hints) {
    return RejectMinusOne(EINVAL, "rdma_getaddrinfo: node, service and hints are all NULL");
  }
  if (!res) return RejectMinusOne(EINVAL, "rdma_getaddrinfo: res is NULL");
  if (hints && hints->ai_family == AF_IB) {
    return RejectMinusOne(EAFNOSUPPORT,
                          "rdma_getaddrinfo: AF_IB addresses are not supported by "
                          "softverbs (RoCE: use AF_INET or AF_INET6)");
  }
  if (InitDevice()) return -1;
  static const rdma_addrinfo kNoHints{};
  const rdma_addrinfo& h = hints ? *hints : kNoHints;
  auto* rai = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (!rai) return RejectMinusOne(ENOMEM, "rdma_getaddrinfo: out of memory");
  int ret = 0;
  if (node || service) {
    addrinfo ai_hints = HintsFor(h);
    addrinfo* ai = nullptr;
    const int gai = getaddrinfo(node, service, hints ? &ai_hints : nullptr, &ai);
    if (gai != 0) {
      // librdmacm answers getaddrinfo's own code (EAI_*, negative), for
      // gai_strerror, and leaves errno as getaddrinfo left it (EAI_SYSTEM).
      const int saved = errno;
      softverbs::abi::Explain("rdma_getaddrinfo: %s: %s", node ? node : "(no node)",
                              gai_strerror(gai));
      rdma_freeaddrinfo(rai);
      errno = saved;
      return gai;
    }
    ret = FromAddrinfo(rai, h, ai);
    freeaddrinfo(ai);
  } else {
    rai->ai_flags = h.ai_flags;
    rai->ai_family = h.ai_family;
    rai->ai_qp_type = h.ai_qp_type;
    rai->ai_port_space = h.ai_port_space;
    if (h.ai_dst_len &&
        !CopyAddr(&rai->ai_dst_addr, &rai->ai_dst_len, h.ai_dst_addr, h.ai_dst_len)) {
      ret = ENOMEM;
    }
  }
  if (!ret && !rai->ai_src_len && h.ai_src_len &&
      !CopyAddr(&rai->ai_src_addr, &rai->ai_src_len, h.ai_src_addr, h.ai_src_len)) {
    ret = ENOMEM;
  }
  if (ret) {
    rdma_freeaddrinfo(rai);
    errno = ret;  // out of memory: -1 with errno, as librdmacm's ERR(ENOMEM)
    return -1;
  }
  *res = rai;
  return 0;
}
