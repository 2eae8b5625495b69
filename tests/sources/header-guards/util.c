#include "bootprof.h"

static inline long twice(long x) {
    BOOTPROF_PROBE(inl, twice, x);
    return 2 * x;
}

long scale(long x) { return twice(x); }

long work(int n) {
    long w = 0;
    for (int i = 0; i < n; i++) {
        BOOTPROF_WAIT(lock);
        BOOTPROF_UNWAIT(lock);
        BOOTPROF_PROBE(util, step, i, w, n);
        w += 7;
    }
    return w;
}
