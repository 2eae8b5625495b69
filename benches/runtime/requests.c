/* A request loop for the cost of worst-interval tracing: each request hits `bench:request_start`,
 * four `bench:step` probes between short pieces of work, and `bench:request_done`. Prints the TSC
 * ticks per request over N requests (the loop timed with rdtsc, as a whole).
 *   requests N */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>
#include "bootprof.h"

static volatile uint64_t sink;

__attribute__((noinline)) static void work(long i) {
    uint64_t x = (uint64_t)i;
    for (int k = 0; k < 50; k++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
}

__attribute__((noinline)) static void request(long i) {
    BOOTPROF_PROBE(bench, request_start, i);
    for (long j = 0; j < 4; j++) {
        work(i + j);
        BOOTPROF_PROBE(bench, step, j);
    }
    BOOTPROF_PROBE(bench, request_done, i);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    for (long i = 0; i < n / 10; i++) request(i); /* warm: rings set up, pages touched */
    uint64_t t0 = __rdtsc();
    for (long i = 0; i < n; i++) request(i);
    uint64_t t1 = __rdtsc();
    printf("%.1f\n", (double)(t1 - t0) / (double)n);
    return 0;
}
