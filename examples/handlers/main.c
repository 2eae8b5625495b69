/* The runtime's C API: a handler counts and sums a probe's argument, first in trap mode, then in
 * call mode; then every probe is disabled again and the program runs on at full speed. */
#include <stdio.h>
#include "bootprof.h"

struct tally {
    long hits;
    unsigned long sum;
};

static void on_item(const struct bootprof_hit *h, void *cookie) {
    struct tally *t = cookie;
    t->hits++;
    t->sum += h->args[1];
}

__attribute__((noinline)) static unsigned long process(unsigned long i) {
    unsigned long v = i * i % 97;
    BOOTPROF_PROBE(shop, item, i, v);
    return v;
}

int main(void) {
    struct tally t = {0, 0};
    printf("%zu sites in this program\n", bootprof_site_count());
    bootprof_add_handler("shop:*", on_item, &t);
    const char *names[] = {"", "trap", "call"};
    for (int mode = BOOTPROF_MODE_TRAP; mode <= BOOTPROF_MODE_CALL; mode++) {
        t.hits = 0;
        t.sum = 0;
        printf("%s mode: %d site(s) enabled\n", names[mode], bootprof_enable_mode("shop:*", mode));
        unsigned long total = 0;
        for (unsigned long i = 0; i < 1000; i++) total += process(i);
        printf("  handler saw %ld hits, argument sum %lu (program's own sum %lu)\n", t.hits, t.sum, total);
    }
    printf("disabled %d site(s)\n", bootprof_disable("*"));
    return 0;
}
