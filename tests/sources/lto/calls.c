// Plain call sites (compiled -DBOOTPROF_CALL_SITES): a probe call and an is-enabled call.
#include "bootprof.h"

__attribute__((noinline)) int call_sites(int x) {
    BOOTPROF_PROBE(app, call, x);
    if (BOOTPROF_ENABLED(app, call_detail))
        return x + 1;
    return x + 1;
}
