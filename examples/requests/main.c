/* A small request server, for a slow-request hunt with `bootprof run --latency`:
 *   main serves 300 requests of about 1 ms each (parse, look up, and on a cache miss, load),
 *   each between the probes server:request_begin and server:request_end (argument: the
 *   request's number), and appends a line to a log under the log's lock;
 *   a flusher thread writes the log out every 25 ms, holding the lock while it does; one flush
 *   (the 6th) has a large backlog and takes 40 ms.
 * The request that arrives during that flush waits for the lock: the slow one. Its window shows
 * the wait, blamed on the flusher's hold, with the flusher's stack. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include "bootprof.h"

static void sleep_us(long us) {
    struct timespec t = {us / 1000000, (us % 1000000) * 1000L};
    while (nanosleep(&t, &t) != 0) {}
}

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static long log_lines;
static atomic_int done;

__attribute__((noinline)) static void write_out(long lines, int big) {
    BOOTPROF_ENTER();
    sleep_us(big ? 40000 : 300 + lines);
    BOOTPROF_EXIT();
}

__attribute__((noinline)) static void flush_log(int big) {
    BOOTPROF_ENTER();
    pthread_mutex_lock(&log_lock);
    BOOTPROF_HOLD(log);
    write_out(log_lines, big);
    log_lines = 0;
    BOOTPROF_RELEASE(log);
    pthread_mutex_unlock(&log_lock);
    BOOTPROF_EXIT();
}

static void *flusher(void *arg) {
    (void)arg;
    BOOTPROF_THREAD(flusher);
    for (int n = 1; !atomic_load(&done); n++) {
        sleep_us(25000);
        flush_log(n == 6);
    }
    return NULL;
}

__attribute__((noinline)) static int parse(long id) {
    BOOTPROF_ENTER();
    sleep_us(200);
    BOOTPROF_EXIT();
    return (int)(id * 7919 % 10);
}

__attribute__((noinline)) static void load(int key) {
    BOOTPROF_ENTER();
    sleep_us(400 + key * 10);
    BOOTPROF_EXIT();
}

__attribute__((noinline)) static void lookup(int key) {
    BOOTPROF_ENTER();
    sleep_us(100);
    if (key < 3) load(key); /* a cache miss */
    BOOTPROF_EXIT();
}

__attribute__((noinline)) static void append_log(void) {
    BOOTPROF_ENTER();
    BOOTPROF_WAIT(log);
    pthread_mutex_lock(&log_lock);
    BOOTPROF_UNWAIT(log);
    log_lines++;
    pthread_mutex_unlock(&log_lock);
    BOOTPROF_EXIT();
}

__attribute__((noinline)) static void serve(long id) {
    BOOTPROF_PROBE(server, request_begin, id);
    lookup(parse(id));
    sleep_us(300);
    append_log();
    BOOTPROF_PROBE(server, request_end, id);
}

int main(void) {
    BOOTPROF_THREAD(main);
    pthread_t t;
    pthread_create(&t, NULL, flusher, NULL);
    for (long id = 0; id < 300; id++) serve(id);
    atomic_store(&done, 1);
    pthread_join(t, NULL);
    printf("served 300 requests\n");
    return 0;
}
