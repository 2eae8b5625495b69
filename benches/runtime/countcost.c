/* What a hit of one probe site (`bench:hit`) costs when T threads hit it at once: each of T
 * threads (released together by a barrier) calls it N times; prints the TSC ticks per hit over
 * all of them (from the first thread's start to the last one's end, divided by T * N: with more
 * threads than cores, what the machine's cores did per hit together) and the site's hit counter
 * afterwards (bootprof_hits: exact when counting, else what the relaxed counter kept). Each thread
 * first warms up with N/10 hits, which the counter includes. Loop overhead is in the figure (the
 * disabled site shows it).
 *   countcost T N     run by benches/runtime/count with the site disabled, enabled, and counted */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>
#include "bootprof.h"

__attribute__((noinline)) static void site_fn(long x) { BOOTPROF_PROBE(bench, hit, x); __asm__ volatile(""); }

static long n;
static pthread_barrier_t go;
/* Each thread's first and last TSC. */
static uint64_t span[64][2];

static void *hitter(void *arg) {
    uint64_t *mine = arg;
    for (long i = 0; i < n / 10; i++) site_fn(i);
    pthread_barrier_wait(&go);
    mine[0] = __rdtsc();
    for (long i = 0; i < n; i++) site_fn(i);
    mine[1] = __rdtsc();
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    n = argc > 2 ? atol(argv[2]) : 1000000;
    if (threads < 1 || threads > 64 || n < 1) {
        fprintf(stderr, "usage: countcost THREADS(1-64) N\n");
        return 2;
    }
    pthread_t t[64];
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, hitter, span[i]);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (int i = 0; i < threads; i++) {
        if (span[i][0] < t0) t0 = span[i][0];
        if (span[i][1] > t1) t1 = span[i][1];
    }
    printf("%.2f %lld\n", (double)(t1 - t0) / ((double)threads * (double)n), (long long)bootprof_hits("bench:hit"));
    return 0;
}
