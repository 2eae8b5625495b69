/* One probe hit in a loop: what a hit costs, in TSC ticks per iteration (the loop included), the
 * fastest of ROUNDS rounds of N hits.
 *   libraryhit N       prints "TICKS"
 * Built by benches/runtime/library twice, linked with the lean runtime (hits through the runtime
 * library) and with --embed-runtime (the whole runtime in the executable). */
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>
#include "bootprof.h"

#define ROUNDS 9

__attribute__((noinline)) static void site_fn(long x) {
    BOOTPROF_PROBE(bench, hit, x);
    __asm__ volatile("");
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    double best = 1e300;
    for (int r = 0; r < ROUNDS; r++) {
        unsigned long long t0 = __rdtsc();
        for (long i = 0; i < n; i++) site_fn(i);
        double ticks = (double)(__rdtsc() - t0) / (double)n;
        if (ticks < best) best = ticks;
    }
    printf("%.2f\n", best);
    return 0;
}
