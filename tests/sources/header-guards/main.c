// The C header's probes (bootprof.h): every BOOTPROF_PROBE is a guard (a 5-byte NOP from an
// `asm goto`, recorded in .bootprof_guard) in front of an out-of-line call, and every
// BOOTPROF_ENABLED a guard alone. Probes with 0 to 6 arguments, an is-enabled test around an
// expensive argument, a probe as the last statement (its call may become a tail jump), in a loop,
// in a static inline function used twice, the annotations, and two TUs; with -ffunction-sections
// and --gc-sections an unused function's guards and calls must go with it.
//#Objects: main.c util.c
//#Compile: -ffunction-sections
//#Link: -Wl,--gc-sections
//#Args: 5
//#ExpectStdout: sum 91
//#ExpectStdout: scaled 182
//#ExpectStdout: worked 35
//#ExpectKinds: probe is-enabled
//#ExpectForm: O0 guard
//#ExpectForm: O2 guard
//#Absent: unused_with_probes
#include "bootprof.h"
#include <stdio.h>
#include <stdlib.h>

long scale(long x);
long work(int n);

static inline long twice(long x) {
    BOOTPROF_PROBE(inl, twice, x);
    return 2 * x;
}

static long expensive(long x) {
    long s = 0;
    for (long i = 0; i < x; i++) s += i * i;
    return s;
}

void unused_with_probes(long x) {
    BOOTPROF_PROBE(gone, one, x);
    if (BOOTPROF_ENABLED(gone, two)) BOOTPROF_PROBE(gone, two, x);
}

__attribute__((noinline)) static void last(long x) { BOOTPROF_PROBE(app, last, x, x + 1); }

int main(int argc, char **argv) {
    BOOTPROF_ENTER();
    int n = argc > 1 ? atoi(argv[1]) : 3;
    BOOTPROF_PROBE(app, start);
    long sum = 0;
    for (int i = 1; i <= 2 * n + 3; i++) {
        BOOTPROF_PROBE(app, loop, i, sum);
        sum += i;
    }
    BOOTPROF_PROBE(app, six, 1, 2, 3, 4, 5, 6);
    if (BOOTPROF_ENABLED(app, report)) BOOTPROF_PROBE(app, report, expensive(sum));
    printf("sum %ld\n", sum);
    printf("scaled %ld\n", twice(sum) == scale(sum) ? twice(sum) : -1);
    printf("worked %ld\n", work(n));
    last(sum);
    BOOTPROF_EVENT(done);
    BOOTPROF_EXIT();
    return 0;
}
