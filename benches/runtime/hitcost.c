/* Enabled-probe costs, measured side by side in one process with rdtsc:
 *   - a bare int3 -> SIGTRAP -> sigreturn round trip (our own no-op handler, before bootprof
 *     installs its handler), vs a trap-mode hit (no handler, and with an empty handler);
 *   - an empty direct call, vs a call-mode hit (no handler, and with an empty handler);
 *   - the disabled site (one NOP) in the same loop, for reference.
 * Each figure is the median of ROUNDS rounds of N iterations, in TSC ticks per iteration, minus
 * nothing (the loop overhead is in every row; the "disabled" row shows it).
 *   hitcost [N]     prints one table. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>
#include "bootprof.h"

#define ROUNDS 9

__attribute__((noinline)) static void empty(long x) { __asm__ volatile("" ::"r"(x)); }
__attribute__((noinline)) static void site_fn(long x) { BOOTPROF_PROBE(bench, hit, x); __asm__ volatile(""); }
static void nop_handler(int s, siginfo_t *i, void *c) { (void)s; (void)i; (void)c; }
static void empty_probe_handler(const struct bootprof_hit *h, void *c) { (void)h; (void)c; }

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*body_fn)(long n);
static double measure(body_fn body, long n) {
    double r[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        uint64_t t0 = __rdtsc();
        body(n);
        uint64_t t1 = __rdtsc();
        r[k] = (double)(t1 - t0) / (double)n;
    }
    qsort(r, ROUNDS, sizeof r[0], cmp);
    return r[ROUNDS / 2];
}

static void body_int3(long n) { for (long i = 0; i < n; i++) __asm__ volatile("int3"); }
static void body_empty(long n) { for (long i = 0; i < n; i++) empty(i); }
static void body_site(long n) { for (long i = 0; i < n; i++) site_fn(i); }
static void body_rdtsc(long n) { uint64_t s = 0; for (long i = 0; i < n; i++) s += __rdtsc(); __asm__ volatile("" ::"r"(s)); }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    long fast = n * 50;
    /* 1. bare int3 round trip, with a handler that does nothing */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = nop_handler;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGTRAP, &sa, &old);
    double int3 = measure(body_int3, n);
    sigaction(SIGTRAP, &old, NULL);

    double disabled = measure(body_site, fast);
    double empty_call = measure(body_empty, fast);
    double rdtsc_cost = measure(body_rdtsc, fast);

    if (bootprof_enable_mode("bench:hit", BOOTPROF_MODE_TRAP) != 1) { fprintf(stderr, "%s\n", bootprof_last_error()); return 1; }
    double trap = measure(body_site, n);
    int h = bootprof_add_handler("bench:hit", empty_probe_handler, NULL);
    double trap_h = measure(body_site, n);
    bootprof_remove_handler(h);
    bootprof_enable_mode("bench:hit", BOOTPROF_MODE_CALL);
    double call = measure(body_site, fast);
    h = bootprof_add_handler("bench:hit", empty_probe_handler, NULL);
    double call_h = measure(body_site, fast);
    bootprof_remove_handler(h);
    bootprof_disable("*");

    printf("%-44s %10s %12s\n", "per iteration (median of 9 rounds)", "TSC ticks", "ratio");
    printf("%-44s %10.1f %12s\n", "disabled site (one NOP) + loop", disabled, "");
    printf("%-44s %10.1f %12s\n", "empty direct call + loop", empty_call, "1.00 (base)");
    printf("%-44s %10.1f %11.2fx\n", "call mode hit, no handler", call, call / empty_call);
    printf("%-44s %10.1f %11.2fx\n", "call mode hit, empty handler", call_h, call_h / empty_call);
    printf("%-44s %10.1f %12s\n", "bare int3 -> SIGTRAP -> sigreturn", int3, "1.00 (base)");
    printf("%-44s %10.1f %11.2fx\n", "trap mode hit, no handler", trap, trap / int3);
    printf("%-44s %10.1f %11.2fx\n", "trap mode hit, empty handler", trap_h, trap_h / int3);
    printf("%-44s %10.1f %12s\n", "rdtsc alone (part of every hit with a handler)", rdtsc_cost, "");
    printf("%-44s %10.1f %12s\n", "call mode over empty call, no handler", call - empty_call, "");
    printf("%-44s %10.1f %12s\n", "call mode over empty call, empty handler", call_h - empty_call, "");
    printf("%-44s %10.1f %12s\n", "trap mode / call mode, no handler", trap / call, "");
    printf("%-44s %10.1f %12s\n", "trap mode / call mode, empty handler", trap_h / call_h, "");
    return 0;
}
