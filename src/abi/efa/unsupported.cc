// Weak "not supported" definitions of every function libefa.so.1 exports.
//
// pyverbs and perftest import efadv_* with BIND_NOW, so every symbol in
// efa.map must resolve when they load. Each definition here is WEAK: a real
// implementation in another .cc file of this library replaces it at link
// time. What stays unimplemented fails honestly with EOPNOTSUPP in the
// convention of the efadv man pages (see docs/abi.md): int functions return
// the errno value, pointer-returning functions set errno and return NULL.
//
// Parameter names are omitted on purpose: the stubs ignore their arguments.

#include <infiniband/efadv.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "abi/not_supported.h"

using softverbs::abi::ErrnoValueNotSupported;
using softverbs::abi::MinusOneNotSupported;
using softverbs::abi::NullNotSupported;

extern "C" {

// ---------------------------------------------------------------------------
// Device and address-handle queries.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT int efadv_query_device(ibv_context*, efadv_device_attr*, uint32_t) {
  return ErrnoValueNotSupported();
}
SOFTVERBS_WEAK_EXPORT int efadv_query_ah(ibv_ah*, efadv_ah_attr*, uint32_t) {
  return ErrnoValueNotSupported();
}

// ---------------------------------------------------------------------------
// QPs and CQs with EFA attributes.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT ibv_qp* efadv_create_driver_qp(ibv_pd*, ibv_qp_init_attr*, uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_qp* efadv_create_qp_ex(ibv_context*, ibv_qp_init_attr_ex*,
                                                 efadv_qp_init_attr*, uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT ibv_cq_ex* efadv_create_cq(ibv_context*, ibv_cq_init_attr_ex*,
                                                 efadv_cq_init_attr*, uint32_t) {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT efadv_cq* efadv_cq_from_ibv_cq_ex(ibv_cq_ex*) {
  return NullNotSupported();
}

}  // extern "C"
