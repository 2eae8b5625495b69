// The C header's guards compiled by clang (C; clang++ gets plain calls, see bootprof.h), whose
// code generation places out-of-line blocks its own way.
//#Driver: clang
//#Objects: main.c
//#Args: 7
//#ExpectStdout: total 35
//#ExpectKinds: probe is-enabled
//#ExpectForm: O0 guard
//#ExpectForm: O2 guard
#include "bootprof.h"
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static long step(long i, long acc) {
    BOOTPROF_PROBE(clang, step, i, acc);
    return acc + i;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 3, acc = 0;
    for (long i = 1; i <= n; i++) acc = step(i, acc);
    if (BOOTPROF_ENABLED(clang, total)) BOOTPROF_PROBE(clang, total, acc);
    printf("total %ld\n", acc + 7);
    return 0;
}
