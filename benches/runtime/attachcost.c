/* What being attachable costs a program that is never attached (benches/runtime/attach):
 *   attachcost start       : nothing (start-up and exit only)
 *   attachcost sites N     : N hits of a disabled probe
 *   attachcost urg N       : N SIGURGs sent to itself (kill), with no handler of its own
 *   attachcost urg-own N   : the same, with a handler of its own installed in main */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bootprof.h"
static volatile int got;
static void own(int s) { (void)s; got++; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "start")) return 0;
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    double t0 = now();
    if (!strcmp(argv[1], "sites")) {
        for (long i = 0; i < n; i++) BOOTPROF_PROBE(cost, hit, i);
    } else {
        if (!strcmp(argv[1], "urg-own")) signal(SIGURG, own);
        pid_t me = getpid();
        for (long i = 0; i < n; i++) kill(me, SIGURG);
    }
    double t = now() - t0;
    fprintf(stderr, "%s: %.1f ns each\n", argv[1], t * 1e9 / n);
    return 0;
}
