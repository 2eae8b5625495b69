/* The disabled-probe cost benchmark's workload (benches/disabled/run builds it once per variant).
 * One probe site per loop iteration, in three loops (throughput, latency, lock) and at the entry
 * of a small function called once per iteration (leaf); the probe's argument is the loop index,
 * so the argument's set-up is part of the cost, as in real code. The variant is chosen at build
 * time:
 *
 *   -DV_BASELINE -DBOOTPROF_NO_PROBES  no probe at all (the macro compiled out)
 *   -DV_BOOTPROF                       BOOTPROF_PROBE(bench, site, i), linked by bootprof-link:
 *                                      a guard (5-byte NOP) in line, the call out of line
 *   -DV_BOOTPROF -DBOOTPROF_CALL_SITES the same probe as a call in line, made a 5-byte NOP
 *                                      (one 5-byte NOP per site; run's nop5x1 variant is a copy of
 *                                      this binary with each site's bytes made 90 90 90 90 90)
 *   -DV_IF_FP                          if (probe_fp != NULL) probe_fp(i); probe_fp is a plain
 *                                      global defined in hooks.c
 *   -DV_USDT                           sys/sdt.h probe behind its semaphore
 *   -DV_CALL_EMPTY                     empty_hook(i), an empty function in hooks.c (no LTO)
 *   -DV_ASM_NOP                        an inline-asm 5-byte NOP, no call, no operands (reference:
 *                                      "the baseline plus one single-uop instruction")
 *
 *   workload {throughput|latency|lock|leaf} N [WARM [CHUNKS]]
 * runs WARM iterations (default N/5), then N iterations timed in CHUNKS chunks (default 1) of
 * N/CHUNKS, and prints
 *   <fastest chunk's TSC ticks/iteration> <median chunk's ticks/iteration> <ns/iteration>
 *   <TSC ticks/ns> <checksum>
 * (ns/iteration and the TSC rate over all N iterations).
 * WARM=0 skips the warm-up and the clocks stay out of the loop (the callgrind runs use it). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#if defined(V_BASELINE) || defined(V_BOOTPROF)
#include "bootprof.h"
#define PROBE(arg) BOOTPROF_PROBE(bench, site, arg)
#elif defined(V_IF_FP)
extern void (*probe_fp)(unsigned long); /* hooks.c: a plain global, NULL */
#define PROBE(arg)                                                                                 \
    do {                                                                                           \
        if (probe_fp != NULL) probe_fp((unsigned long)(arg));                                      \
    } while (0)
#elif defined(V_USDT)
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
unsigned short bench_site_semaphore __attribute__((unused)) __attribute__((section(".probes")));
#define PROBE(arg)                                                                                 \
    do {                                                                                           \
        if (__builtin_expect(bench_site_semaphore, 0)) STAP_PROBE1(bench, site, arg);              \
    } while (0)
#elif defined(V_CALL_EMPTY)
extern void empty_hook(unsigned long); /* hooks.c: returns at once */
#define PROBE(arg) empty_hook((unsigned long)(arg))
#elif defined(V_ASM_NOP)
#define PROBE(arg) __asm__ volatile(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00")
#else
#error "define one of V_BASELINE V_BOOTPROF V_IF_FP V_USDT V_CALL_EMPTY V_ASM_NOP"
#endif

/* throughput: four independent one-cycle dependency chains fed by an L1-resident table. */
#define TBL 512
uint64_t tbl[TBL];

__attribute__((noinline)) uint64_t work_throughput(long n) {
    uint64_t a = 1, b = 2, c = 3, d = 4;
    for (long i = 0; i < n; i++) {
        uint64_t x = tbl[i & (TBL - 1)];
        a += x;
        b ^= x;
        c += x ^ (uint64_t)i;
        d ^= x + (uint64_t)i;
        PROBE(i);
    }
    return a ^ b ^ c ^ d;
}

/* latency: one long dependent chain per iteration: an L1 load whose index depends on the
 * previous iteration's multiplies (load, xor, multiply, shift-xor, multiply, xor, and). */
#define PERM 1024
uint32_t perm[PERM];

__attribute__((noinline)) uint64_t work_latency(long n) {
    uint32_t p = 0;
    uint64_t h = 1;
    for (long i = 0; i < n; i++) {
        p = perm[p];
        h = (h ^ p) * 0x9E3779B97F4A7C15ull;
        h = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull;
        p = (p ^ (uint32_t)(h >> 32)) & (PERM - 1);
        PROBE(i);
    }
    return h ^ p;
}

/* lock: an uncontended mutex lock/unlock pair around a counter, the probe inside. */
pthread_mutex_t bench_lock = PTHREAD_MUTEX_INITIALIZER;
uint64_t counter;

__attribute__((noinline)) uint64_t work_lock(long n) {
    for (long i = 0; i < n; i++) {
        pthread_mutex_lock(&bench_lock);
        counter++;
        PROBE(i);
        pthread_mutex_unlock(&bench_lock);
    }
    return counter;
}

/* leaf: the site at the entry of a small leaf function called once per iteration (a probe at a
 * function's start, with the function's argument); the calls are independent of each other, so
 * the loop is throughput-bound. Without the probe the function needs no stack frame; a call in it
 * (even one that becomes a NOP) makes it save what lives across the call. */
__attribute__((noinline)) uint64_t leaf_mix(uint64_t x, uint64_t i) {
    PROBE(i);
    return (x ^ (x >> 29)) * 0x94D049BB133111EBull + i;
}

__attribute__((noinline)) uint64_t work_leaf(long n) {
    uint64_t s = 1;
    for (long i = 0; i < n; i++) s += leaf_mix((uint64_t)i ^ 0x5555, (uint64_t)i);
    return s;
}

static inline uint64_t tsc_start(void) {
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
}

static inline uint64_t tsc_stop(void) {
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s {throughput|latency|lock|leaf} N [WARM [CHUNKS]]\n", argv[0]);
        return 2;
    }
    uint64_t (*fn)(long);
    if (!strcmp(argv[1], "throughput")) fn = work_throughput;
    else if (!strcmp(argv[1], "latency")) fn = work_latency;
    else if (!strcmp(argv[1], "lock")) fn = work_lock;
    else if (!strcmp(argv[1], "leaf")) fn = work_leaf;
    else {
        fprintf(stderr, "unknown workload %s\n", argv[1]);
        return 2;
    }
    long n = atol(argv[2]);
    long warm = argc > 3 ? atol(argv[3]) : n / 5;
    long chunks = argc > 4 ? atol(argv[4]) : 1;
    if (n < 1 || warm < 0 || chunks < 1 || chunks > n) {
        fprintf(stderr, "bad N, WARM or CHUNKS\n");
        return 2;
    }

    /* Deterministic data: table values, and one random cycle through perm (Sattolo). */
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < TBL; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        tbl[i] = s;
    }
    for (int i = 0; i < PERM; i++) perm[i] = (uint32_t)i;
    for (int i = PERM - 1; i > 0; i--) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int j = (int)(s % (uint64_t)i);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }

    if (warm == 0) { /* instruction counting: no clocks, no warm-up */
        printf("0 0 0 0 %llu\n", (unsigned long long)fn(n));
        return 0;
    }
    long each = n / chunks;
    double *t = malloc(sizeof(double) * (size_t)chunks);
    uint64_t sum = fn(warm), ticks = 0;
    double w0 = now_ns();
    for (long k = 0; k < chunks; k++) {
        uint64_t t0 = tsc_start();
        sum += fn(each);
        uint64_t t1 = tsc_stop();
        ticks += t1 - t0;
        t[k] = (double)(t1 - t0) / (double)each;
    }
    double w1 = now_ns();
    qsort(t, (size_t)chunks, sizeof(double), cmp_double);
    double ticks_median = chunks % 2 ? t[chunks / 2] : (t[chunks / 2 - 1] + t[chunks / 2]) / 2;
    printf("%.4f %.4f %.4f %.4f %llu\n", t[0], ticks_median, (w1 - w0) / (double)(each * chunks),
           (double)ticks / (w1 - w0), (unsigned long long)sum);
    free(t);
    return 0;
}
