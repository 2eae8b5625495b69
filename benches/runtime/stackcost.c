/* The cost of a call stack at a hit (bootprof run --stacktrace), measured side by side in one
 * process with rdtsc: one probe, hit at the bottom of a recursion DEPTH calls deep, with its
 * stack recorded and without (bootprof_stacktrace switches it between the two), in call and in
 * trap mode, recording into memory or a session lane as the environment says (run it with
 * BOOTPROF_RECORD=1 or under a session; BOOTPROF_KEEP=last keeps the buffer from filling).
 * Each round runs every variant once, back to back (interleaved, so drift on a shared machine
 * hits all alike); each figure is the median over ROUNDS rounds, in TSC ticks per hit of N hits,
 * the recursion included (the same in both columns: their difference is the stack's cost). A
 * stack holds the site and the return addresses of the DEPTH + 1 calls of `down`, and of body,
 * once and main: DEPTH + 5 frames, at most 64 (the C library's own functions keep no frame
 * pointers, so the walk ends where main returns to).
 *   stackcost [N]     prints one table. Compile with -fno-omit-frame-pointer -fno-shrink-wrap
 *   (shrink-wrapped, down(0) would hit the probe before its prologue: one frame fewer). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>
#include "bootprof.h"

#define ROUNDS 9

__attribute__((noipa)) static long down(long depth, long x) {
    if (depth == 0) {
        BOOTPROF_PROBE(bench, stack, x);
        return x;
    }
    long r = down(depth - 1, x);
    __asm__ volatile("" ::: "memory"); /* not a tail call: every level keeps its frame */
    return r + 1;
}

static long depth;

__attribute__((noipa)) static void body(long n) {
    for (long i = 0; i < n; i++) down(depth, i);
}

__attribute__((noipa)) static double once(long n) {
    uint64_t t0 = __rdtsc();
    body(n);
    uint64_t t1 = __rdtsc();
    return (double)(t1 - t0) / (double)n;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { CALL, CALL_STACK, TRAP, TRAP_STACK, NVAR };

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000;
    static const long depths[] = {0, 8, 24, 64};
    if (bootprof_record(1) != 0) { fprintf(stderr, "recording: %s\n", bootprof_last_error()); return 1; }
    printf("%-34s %10s %12s %10s %10s\n", "per hit, median of 9 rounds", "no stack", "with stack",
           "stack", "per frame");
    for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
        depth = depths[d];
        double r[NVAR][ROUNDS];
        for (int k = 0; k < ROUNDS; k++) {
            for (int v = 0; v < NVAR; v++) {
                bootprof_enable_mode("bench:stack", v < TRAP ? BOOTPROF_MODE_CALL : BOOTPROF_MODE_TRAP);
                bootprof_stacktrace("bench:stack", v == CALL_STACK || v == TRAP_STACK);
                r[v][k] = once(v < TRAP ? n * 10 : n);
            }
        }
        bootprof_disable("*");
        double m[NVAR];
        for (int v = 0; v < NVAR; v++) {
            qsort(r[v], ROUNDS, sizeof r[v][0], cmp);
            m[v] = r[v][ROUNDS / 2];
        }
        long frames = depth + 5 > 64 ? 64 : depth + 5;
        for (int mode = 0; mode < 2; mode++) {
            double plain = m[2 * mode], stack = m[2 * mode + 1];
            char label[64];
            snprintf(label, sizeof label, "%s mode, depth %ld (%ld frames)", mode ? "trap" : "call", depth,
                     frames);
            printf("%-34s %10.1f %12.1f %10.1f %10.1f\n", label, plain, stack, stack - plain,
                   (stack - plain) / (double)frames);
        }
    }
    printf("(TSC ticks; \"stack\" = with stack - no stack, \"per frame\" = that / frames recorded)\n");
    return 0;
}
