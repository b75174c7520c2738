// Fills every slot of a context's ops tables with an explicit "not
// supported" answer (EOPNOTSUPP, or NULL with errno = EOPNOTSUPP).
#pragma once

#include <infiniband/verbs.h>

namespace softverbs::provider {

void InstallUnsupportedOps(verbs_context* v);

}  // namespace softverbs::provider
