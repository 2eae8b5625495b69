/* Calls of known lengths for the call filters (bootprof run --depth, --min-time): main calls
   outer, which calls quick three times and slow once; slow sleeps 3 ms and calls quick and nap
   (which sleeps 2 ms). Built with -pg -mfentry (run with --graph) and with
   -finstrument-functions. */
#include <stdio.h>
#include <time.h>

static volatile long sink;

__attribute__((no_instrument_function)) static void sleep_ms(long ms) {
    struct timespec t = {0, ms * 1000000};
    while (nanosleep(&t, &t) != 0) {
    }
}

__attribute__((noinline)) void quick(long i) { sink += i; }

__attribute__((noinline)) void nap(void) { sleep_ms(2); }

__attribute__((noinline)) void slow(void) {
    sleep_ms(3);
    quick(10);
    nap();
}

__attribute__((noinline)) void outer(void) {
    for (long i = 0; i < 3; i++) quick(i);
    slow();
}

int main(void) {
    outer();
    printf("%ld\n", sink);
    return 0;
}
