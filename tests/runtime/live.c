/* A stream of hits too fast for the live view to keep up with: `live THREADS HITS` starts THREADS
 * workers that fire live:hit with the numbers 0 .. HITS-1 of one sequence, each number once, as
 * fast as they can, and ends when all are taken. So a session of it holds exactly HITS records
 * were nothing lost, each with its own number: one shown twice, or shown and counted lost, is
 * seen. Prints `hits N` at the end (N the hits made, HITS). */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <pthread.h>
#include <stdatomic.h>
#include "bootprof.h"

static atomic_ulong seq;
static unsigned long hits;

static void *work(void *arg) {
    unsigned long made = 0;
    for (;;) {
        unsigned long s = atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed);
        if (s >= hits) break;
        BOOTPROF_PROBE(live, hit, s);
        made++;
    }
    *(unsigned long *)arg = made;
    return NULL;
}

int main(int argc, char **argv) {
    CHECK(argc == 3, "usage: live THREADS HITS");
    int n = atoi(argv[1]);
    CHECK(n > 0 && n <= 64, "1 to 64 threads");
    hits = strtoul(argv[2], NULL, 10);
    pthread_t threads[64];
    unsigned long made[64] = {0};
    for (int i = 0; i < n; i++) pthread_create(&threads[i], NULL, work, &made[i]);
    unsigned long total = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
        total += made[i];
    }
    CHECK(total == hits, "%lu hits made, not %lu", total, hits);
    printf("hits %lu\n", total);
    return 0;
}
