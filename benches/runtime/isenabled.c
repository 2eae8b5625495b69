/* An is-enabled test compiled as a call (`if (BOOTPROF_ENABLED(bench, ie))` with
 * BOOTPROF_CALL_SITES) in a loop, while a second thread is alive, as in any program enabling
 * probes from a thread or attached to while it runs. In TSC ticks per iteration (loop included),
 * the median of ROUNDS rounds of N iterations, each round running every variant back to back:
 *   disabled   the site's NOP
 *   call       the site enabled with bootprof_enable_mode(..., BOOTPROF_MODE_CALL) after the
 *              thread started: the mode the site got (bootprof_site_info) is printed with it
 *   trap       the site enabled in trap mode, for reference
 * No handler: the hit is the dispatch alone.
 *   isenabled [N] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <x86intrin.h>
#include "bootprof.h"

#define ROUNDS 9

static long sink;
__attribute__((noinline)) static void body(long n) {
    for (long i = 0; i < n; i++)
        if (BOOTPROF_ENABLED(bench, ie)) sink++;
}

static double once(long n) {
    uint64_t t0 = __rdtsc();
    body(n);
    return (double)(__rdtsc() - t0) / (double)n;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int pipe_fds[2];
static void *idle(void *arg) {
    (void)arg;
    char c;
    while (read(pipe_fds[0], &c, 1) < 0) {}
    return NULL;
}

/* The mode the site is in: 0 disabled, BOOTPROF_MODE_TRAP or BOOTPROF_MODE_CALL. */
static int mode_of_site(void) {
    for (size_t i = 0; i < bootprof_site_count(); i++) {
        struct bootprof_site s;
        if (bootprof_site_info(i, &s) == 0 && s.kind == BOOTPROF_KIND_ISENABLED) return s.mode;
    }
    return -1;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    pthread_t t;
    if (pipe(pipe_fds) != 0 || pthread_create(&t, NULL, idle, NULL) != 0) return 1;
    const int modes[3] = {0, BOOTPROF_MODE_CALL, BOOTPROF_MODE_TRAP};
    double ticks[3][ROUNDS];
    int got = -1;
    for (int r = 0; r < ROUNDS; r++) {
        for (int v = 0; v < 3; v++) {
            if (modes[v] && bootprof_enable_mode("bench:ie", modes[v]) != 1) {
                fprintf(stderr, "enable: %s\n", bootprof_last_error());
                return 1;
            }
            if (modes[v] == BOOTPROF_MODE_CALL) got = mode_of_site();
            ticks[v][r] = once(modes[v] == BOOTPROF_MODE_TRAP ? n / 100 : n);
            if (modes[v]) bootprof_disable("bench:ie");
        }
    }
    const char *names[3] = {"disabled", "call", "trap"};
    for (int v = 0; v < 3; v++) {
        qsort(ticks[v], ROUNDS, sizeof ticks[v][0], cmp);
        printf("%-9s %10.2f ticks/iteration", names[v], ticks[v][ROUNDS / 2]);
        if (modes[v] == BOOTPROF_MODE_CALL)
            printf("  (enabled as %s mode)", got == BOOTPROF_MODE_CALL ? "call" : got == BOOTPROF_MODE_TRAP ? "trap" : "?");
        printf("\n");
    }
    if (write(pipe_fds[1], "x", 1) != 1) return 1;
    pthread_join(t, NULL);
    return sink == -1;
}
