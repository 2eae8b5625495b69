/* The same calls, recorded by a hit that is only recorded (no handler: the dispatcher's short
 * path) and by one that a handler also gets (RECORD_PATHS_HANDLER=1: a handler that only counts
 * its hits, added by a constructor before main, for every site: the general path). Built with
 * -pg -mfentry (under bootprof run --graph) and with -finstrument-functions; the test checks
 * that both runs record the same calls, exactly. Prints what it computed and the hits the
 * handler got. */
#include <stdio.h>
#include <stdlib.h>

#include "bootprof.h"

#define NOINLINE __attribute__((noinline))
/* Keeps a call from being folded into its caller or turned into a loop. */
#define KEEP(x) __asm__ volatile("" : "+r"(x))

static long handled;

__attribute__((no_instrument_function)) static void count(const struct bootprof_hit *hit,
                                                          void *cookie) {
    (void)hit;
    (void)cookie;
    handled++;
}

__attribute__((no_instrument_function, constructor)) static void install(void) {
    const char *h = getenv("RECORD_PATHS_HANDLER");
    if (h && h[0] == '1' && bootprof_add_handler("*", count, 0) < 0) {
        fprintf(stderr, "cannot add the handler\n");
        exit(1);
    }
}

/* Its argument in a vector register: a hook's trampoline keeps it for the function. */
NOINLINE double scale(double x, int n) {
    KEEP(n);
    return x * n;
}
NOINLINE int leaf(int x) {
    KEEP(x);
    return x + 1;
}
NOINLINE int mid(int x) {
    int a = leaf(x);
    KEEP(a);
    int b = leaf(a);
    KEEP(b);
    return b;
}
NOINLINE int outer(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        s += mid(i);
        KEEP(s);
    }
    return s;
}

int main(void) {
    double d = scale(1.5, 4);
    int s = outer(2);
    printf("%d %.1f handled %ld\n", s, d, handled);
    return 0;
}
