/* A program to count hits of while attached: prints `ready`, then for each number N read from
 * standard input runs four threads that each hit ac:hot N times and ac:warm N/2 times, and
 * prints `done N` when they have all finished. Between two numbers no site is hit, so a client
 * that attaches before sending N and detaches after `done N` must count exactly 4N and 2N. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <pthread.h>
#include "bootprof.h"

static long n;

static void *work(void *arg) {
    (void)arg;
    for (long i = 0; i < n; i++) {
        BOOTPROF_PROBE(ac, hot, i);
        if (i & 1) BOOTPROF_PROBE(ac, warm, i);
    }
    return NULL;
}

int main(void) {
    char line[64];
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    while (fgets(line, sizeof line, stdin)) {
        n = atol(line);
        pthread_t threads[4];
        for (int i = 0; i < 4; i++) CHECK(pthread_create(&threads[i], NULL, work, NULL) == 0, "thread");
        for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
        printf("done %ld\n", n);
    }
    return 0;
}
