// The LTO test program (rewriter/tests/integration/lto.rs): every kind of site across translation
// units built with -flto (this file, calls.c and the archive libwork.a of work.c and unused.c) and
// one built without (plain.c), so that one link line mixes IR and machine code. This file uses the
// header's guards and an is-enabled test; calls.c the plain call sites.
#include <stdio.h>
#include "bootprof.h"

int call_sites(int x);
int work(int x);
int plain(int x);

__attribute__((noinline)) static int square(int x) { return x * x; }

int main(int argc, char **argv) {
    (void)argv;
    BOOTPROF_PROBE(app, start, argc);
    int total = 0;
    for (int i = 0; i < 10; i++) {
        total += square(i) + call_sites(i) + work(i) + plain(i);
        if (BOOTPROF_ENABLED(app, verbose))
            BOOTPROF_PROBE(app, verbose, total);
    }
    printf("total %d\n", total);
    return 0;
}
