/* bootprof.h's probes: guards (.bootprof_guard records) in front of out-of-line calls. */
#include "bootprof.h"

static inline long twice(long x) {
    BOOTPROF_PROBE(seed, twice, x);
    return 2 * x;
}

long guarded(long n) {
    long s = 0;
    BOOTPROF_ENTER();
    for (long i = 0; i < n; i++) {
        BOOTPROF_PROBE(seed, loop, i, s);
        s += twice(i);
    }
    if (BOOTPROF_ENABLED(seed, report)) BOOTPROF_PROBE(seed, report, s, n, 3, 4, 5, 6);
    BOOTPROF_EXIT();
    return s;
}

void tail(long x) { BOOTPROF_PROBE(seed, tail, x); }
