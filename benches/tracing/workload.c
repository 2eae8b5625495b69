/* A call-heavy workload for function-tracing overhead: recursive fib plus a small helper (about
 * 390,000 function calls with the default argument; the benchmark counts them from the trace).
 * Built with -pg -mfentry. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__attribute__((noinline)) static int mix(int a, int b) { return (a * 31) ^ b; }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 27;
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    int s = 0;
    for (int i = 0; i < 1000; i++) s = mix(s, i);
    int f = fib(n);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%d %d\n", f, s);
    /* the call phase alone, for the benchmark (start-up and the dump at exit excluded) */
    fprintf(stderr, "calls-phase-ns %ld\n", (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec));
    /* and the CPU time this process spent in it (steadier on a loaded machine; what other
     * processes, a tracer's own, spent meanwhile is not in it) */
    fprintf(stderr, "calls-phase-cpu-ns %ld\n", (c1.tv_sec - c0.tv_sec) * 1000000000L + (c1.tv_nsec - c0.tv_nsec));
    return 0;
}
