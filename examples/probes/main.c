/* A small program with named probes: a "boot" in phases, each bracketed by probes, and an
 * is-enabled test guarding work that only a tracer wants. */
#include <stdio.h>
#include <stdlib.h>
#include "bootprof.h"
#include "work.h"

static unsigned long checksum_of(const char *s) {
    unsigned long h = 5381;
    while (*s) h = h * 33 + (unsigned char)*s++;
    return h;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 1000;
    BOOTPROF_PROBE(app, start, argc, rounds);
    struct config cfg = parse_config(argc > 2 ? argv[2] : "alpha=1,beta=2,gamma=3");
    BOOTPROF_PROBE(app, configured, cfg.count);
    unsigned long total = 0;
    for (int i = 0; i < rounds; i++) total += step(&cfg, i);
    if (BOOTPROF_ENABLED(app, report))
        BOOTPROF_PROBE(app, report, checksum_of("expensive-to-compute"), total);
    printf("config entries: %d\n", cfg.count);
    printf("total: %lu\n", total);
    BOOTPROF_PROBE(app, done);
    return 0;
}
