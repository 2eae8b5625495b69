/* Requests for worst-interval tracing: `latency:request_start` (argument: the request's number)
 * and `latency:request_done` around each request (and, built with -finstrument-functions, the
 * ENTER/EXIT of `request`), `latency:step` (argument: request number) in the middle of each, and
 * a second thread that hits `latency:background` (argument: a counter) twenty times every 100 us
 * while requests run, so a kept window must hold other threads' records too.
 *
 *   latency requests N SLOW_MS SLOW...  N requests of about 1 ms; the requests numbered SLOW...
 *                                       take SLOW_MS ms
 *   latency growing SECONDS BG REQ      requests whose length grows (each a new longest) for
 *                                       SECONDS, and on until the background thread has fired
 *                                       at least BG probes and REQ requests were made (a busy
 *                                       machine slows both down)
 *   latency frames N                    one probe, `latency:frame`, hit N times 1 ms apart; frame
 *                                       N/2 + 1 comes 100 ms after frame N/2
 *   latency held MS                     a thread named holder enters hold_lock and takes a lock
 *                                       (its HOLD); then one request (number 0) starts, waits for
 *                                       the lock (WAIT/UNWAIT), which the holder keeps for MS ms
 *                                       after the WAIT, and ends
 * Prints "done N background M" (M: background records) on success. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include "bootprof.h"

static atomic_int stop;

#define NOT_TRACED __attribute__((no_instrument_function))

NOT_TRACED static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Busy for `ms` milliseconds (a sleep would do too; busy keeps the thread on a CPU). */
NOT_TRACED static void busy(double ms) {
    double end = now_ms() + ms;
    while (now_ms() < end) {
    }
}

static atomic_long background_records;

NOT_TRACED static void *background(void *arg) {
    (void)arg;
    long i = 0;
    while (!atomic_load(&stop)) {
        for (int j = 0; j < 20; j++) BOOTPROF_PROBE(latency, background, i++);
        atomic_store_explicit(&background_records, i, memory_order_relaxed);
        usleep(100);
    }
    atomic_store(&background_records, i);
    return NULL;
}

__attribute__((noinline)) static void request(long n, double ms) {
    BOOTPROF_PROBE(latency, request_start, n);
    busy(ms / 2);
    BOOTPROF_PROBE(latency, step, n);
    busy(ms / 2);
    BOOTPROF_PROBE(latency, request_done, n);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int held, waiting;

__attribute__((noinline)) static void hold_lock(double ms) {
    BOOTPROF_ENTER();
    pthread_mutex_lock(&lock);
    BOOTPROF_HOLD(lock);
    atomic_store(&held, 1);
    /* Released only after the request's WAIT, however a busy machine schedules the two. */
    while (!atomic_load(&waiting)) {
    }
    busy(ms);
    BOOTPROF_RELEASE(lock);
    pthread_mutex_unlock(&lock);
    BOOTPROF_EXIT();
}

NOT_TRACED static void *holder(void *arg) {
    BOOTPROF_THREAD(holder);
    hold_lock(*(double *)arg);
    return NULL;
}

/* A request that starts while another thread holds the lock it needs. */
NOT_TRACED static void held_request(double ms) {
    pthread_t h;
    CHECK(pthread_create(&h, NULL, holder, &ms) == 0, "pthread_create");
    while (!atomic_load(&held)) {
    }
    busy(1.0);
    BOOTPROF_PROBE(latency, request_start, 0);
    BOOTPROF_WAIT(lock);
    atomic_store(&waiting, 1);
    pthread_mutex_lock(&lock);
    BOOTPROF_UNWAIT(lock);
    pthread_mutex_unlock(&lock);
    BOOTPROF_PROBE(latency, request_done, 0);
    pthread_join(h, NULL);
}

NOT_TRACED static int is_slow(long i, int argc, char **argv) {
    for (int k = 4; k < argc; k++)
        if (atol(argv[k]) == i) return 1;
    return 0;
}

NOT_TRACED int main(int argc, char **argv) {
    CHECK(argc >= 3, "usage: latency requests N SLOW_MS SLOW... | growing SECONDS [BG REQ] | frames N | held MS");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, background, NULL) == 0, "pthread_create");
    long done = 0;
    if (!strcmp(argv[1], "requests")) {
        CHECK(argc >= 5, "requests N SLOW_MS SLOW...");
        long n = atol(argv[2]);
        double slow_ms = atof(argv[3]);
        for (long i = 0; i < n; i++) request(i, is_slow(i, argc, argv) ? slow_ms : 1.0);
        done = n;
    } else if (!strcmp(argv[1], "growing")) {
        double end = now_ms() + atof(argv[2]) * 1e3;
        long min_background = argc > 3 ? atol(argv[3]) : 0;
        long min_requests = argc > 4 ? atol(argv[4]) : 0;
        /* Each request 1 ms longer than the longest so far as measured here, around the probes
         * (so at least as long as the runtime measures it): every one a new longest, even when
         * a busy machine stretches one. */
        double longest = 0;
        while (now_ms() < end || atomic_load(&background_records) < min_background ||
               done < min_requests) {
            double start = now_ms();
            request(done++, longest + 1);
            double took = now_ms() - start;
            if (took > longest) longest = took;
        }
    } else if (!strcmp(argv[1], "held")) {
        held_request(atof(argv[2]));
        done = 1;
    } else if (!strcmp(argv[1], "frames")) {
        long n = atol(argv[2]);
        for (long i = 0; i < n; i++) {
            BOOTPROF_PROBE(latency, frame, i);
            busy(i == n / 2 ? 100.0 : 1.0);
        }
        done = n;
    } else {
        CHECK(0, "unknown mode");
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    printf("done %ld background %ld\n", done, atomic_load(&background_records));
    return 0;
}
