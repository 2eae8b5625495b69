/* Enabled-probe costs, measured side by side in one process with rdtsc:
 *   - a bare int3 -> SIGTRAP -> sigreturn round trip (our own no-op handler, before bootprof
 *     installs its handler), vs a trap-mode hit (no handler, and with an empty handler);
 *   - an empty direct call, vs a call-mode hit (no handler, and with an empty handler);
 *   - the disabled site (one NOP) in the same loop, for reference.
 * Each round runs every variant once, back to back (interleaved, so drift on a shared machine hits
 * all alike); each figure is the median over ROUNDS rounds, in TSC ticks per iteration of N
 * iterations, loop overhead included (the "disabled" row shows it).
 *   hitcost [N]     prints one table. Built twice by benches/runtime/run: with bootprof.h's guards
 *   (an enabled hit jumps to the out-of-line call first) and with BOOTPROF_CALL_SITES. */
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
static double once(body_fn body, long n) {
    uint64_t t0 = __rdtsc();
    body(n);
    uint64_t t1 = __rdtsc();
    return (double)(t1 - t0) / (double)n;
}

static void body_int3(long n) { for (long i = 0; i < n; i++) __asm__ volatile("int3"); }
static void body_empty(long n) { for (long i = 0; i < n; i++) empty(i); }
static void body_site(long n) { for (long i = 0; i < n; i++) site_fn(i); }
static void body_rdtsc(long n) { uint64_t s = 0; for (long i = 0; i < n; i++) s += __rdtsc(); __asm__ volatile("" ::"r"(s)); }

enum { DISABLED, EMPTY, RDTSC, CALL, CALL_H, INT3, TRAP, TRAP_H, NVAR };

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    long fast = n * 50;
    /* bootprof's SIGTRAP handler is installed by the first enable; keep it to swap back. */
    if (bootprof_enable("bench:hit") != 1 + BOOTPROF_GUARDS) { fprintf(stderr, "enable: %s\n", bootprof_last_error()); return 1; }
    bootprof_disable("*");
    struct sigaction ours, nop;
    sigaction(SIGTRAP, NULL, &ours);
    memset(&nop, 0, sizeof nop);
    nop.sa_sigaction = nop_handler;
    nop.sa_flags = SA_SIGINFO;

    /* Every round measures every variant, back to back, so drift hits them all alike. */
    double r[NVAR][ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        r[DISABLED][k] = once(body_site, fast);
        r[EMPTY][k] = once(body_empty, fast);
        r[RDTSC][k] = once(body_rdtsc, fast);
        bootprof_enable_mode("bench:hit", BOOTPROF_MODE_CALL);
        r[CALL][k] = once(body_site, fast);
        int h = bootprof_add_handler("bench:hit", empty_probe_handler, NULL);
        r[CALL_H][k] = once(body_site, fast);
        bootprof_remove_handler(h);
        bootprof_disable("*");
        sigaction(SIGTRAP, &nop, NULL);
        r[INT3][k] = once(body_int3, n);
        sigaction(SIGTRAP, &ours, NULL);
        bootprof_enable_mode("bench:hit", BOOTPROF_MODE_TRAP);
        r[TRAP][k] = once(body_site, n);
        h = bootprof_add_handler("bench:hit", empty_probe_handler, NULL);
        r[TRAP_H][k] = once(body_site, n);
        bootprof_remove_handler(h);
        bootprof_disable("*");
    }
    double m[NVAR];
    for (int v = 0; v < NVAR; v++) {
        qsort(r[v], ROUNDS, sizeof r[v][0], cmp);
        m[v] = r[v][ROUNDS / 2];
    }
    printf("probes compiled as %s\n", BOOTPROF_GUARDS ? "guards (the call out of line)" : "calls in line (BOOTPROF_CALL_SITES)");
    printf("%-46s %10s %12s\n", "per iteration, median of 9 interleaved rounds", "TSC ticks", "ratio");
    printf("%-46s %10.1f %12s\n", "disabled site (one NOP) + loop", m[DISABLED], "");
    printf("%-46s %10.1f %12s\n", "empty direct call + loop", m[EMPTY], "1.00 (base)");
    printf("%-46s %10.1f %11.2fx\n", "call mode hit, no handler", m[CALL], m[CALL] / m[EMPTY]);
    printf("%-46s %10.1f %11.2fx\n", "call mode hit, empty handler", m[CALL_H], m[CALL_H] / m[EMPTY]);
    printf("%-46s %10.1f %12s\n", "bare int3 -> SIGTRAP -> sigreturn", m[INT3], "1.00 (base)");
    printf("%-46s %10.1f %11.2fx\n", "trap mode hit, no handler", m[TRAP], m[TRAP] / m[INT3]);
    printf("%-46s %10.1f %11.2fx\n", "trap mode hit, empty handler", m[TRAP_H], m[TRAP_H] / m[INT3]);
    printf("%-46s %10.1f %12s\n", "rdtsc + loop (part of every hit with a handler)", m[RDTSC], "");
    printf("%-46s %10.1f %12s\n", "call mode over empty call, no handler", m[CALL] - m[EMPTY], "");
    printf("%-46s %10.1f %12s\n", "call mode over empty call, empty handler", m[CALL_H] - m[EMPTY], "");
    printf("%-46s %10.1f %12s\n", "trap mode / call mode, no handler", m[TRAP] / m[CALL], "");
    printf("%-46s %10.1f %12s\n", "trap mode / call mode, empty handler", m[TRAP_H] / m[CALL_H], "");
    return 0;
}
