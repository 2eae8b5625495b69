/* A server-like program to attach to: `attach THREADS` starts THREADS workers that hit sites
 * continuously until standard input closes, then checks its own results and prints them.
 *
 * Each step of a worker takes the next number of one global sequence and fires attach:even or
 * attach:odd with it (so the numbers a session holds show which hits it got, and in what order
 * they were taken), and calls step() (an -finstrument-functions function when built with it:
 * ENTER/EXIT sites). Each worker sums the numbers it took; at the end the sums of all workers
 * must add up to 0 + 1 + ... + (N - 1), N the numbers taken: any hit that lost or changed one
 * shows. Prints `ready` once every worker runs, `ok N` at the end.
 *
 * With ATTACH_TEST_HANDLER=1 it also installs a SIGURG handler of its own before the runtime
 * registers (from a constructor that runs first), which counts the signals it gets: `urg N` at
 * the end. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>
#include "bootprof.h"

static atomic_ulong seq;
static atomic_int stop;
static atomic_int running;
static volatile sig_atomic_t urgs;

__attribute__((noinline)) static unsigned long step(unsigned long s) {
    __asm__ volatile("" ::: "memory");
    return s * 3 + 1;
}

struct worker {
    pthread_t thread;
    unsigned long sum, steps, check;
};

static void *work(void *arg) {
    struct worker *w = arg;
    atomic_fetch_add(&running, 1);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        unsigned long s = atomic_fetch_add(&seq, 1);
        if (s & 1)
            BOOTPROF_PROBE(attach, odd, s);
        else
            BOOTPROF_PROBE(attach, even, s);
        w->check += step(s) - 3 * s;
        w->sum += s;
        w->steps++;
    }
    return NULL;
}

static void on_urg(int sig) {
    (void)sig;
    urgs++;
}

/* Before the runtime's registration (priority 99): the program's handler is there first. (A
 * priority below 101 is the implementation's to use; here it is one, standing in for a library
 * loaded first.) */
#pragma GCC diagnostic ignored "-Wprio-ctor-dtor"
__attribute__((constructor(98))) static void own_handler(void) {
    const char *h = getenv("ATTACH_TEST_HANDLER");
    if (!h || strcmp(h, "1") != 0) return;
    signal(SIGURG, on_urg);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2;
    CHECK(n > 0 && n <= 64, "1 to 64 threads");
    struct worker *w = calloc((size_t)n, sizeof *w);
    for (int i = 0; i < n; i++) pthread_create(&w[i].thread, NULL, work, &w[i]);
    while (atomic_load(&running) < n) usleep(1000);
    printf("ready\n");
    fflush(stdout);
    char buf[256];
    while (read(0, buf, sizeof buf) > 0) {}
    atomic_store(&stop, 1);
    unsigned long sum = 0, steps = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(w[i].thread, NULL);
        sum += w[i].sum;
        steps += w[i].steps;
        CHECK(w[i].check == w[i].steps, "thread %d: step() returned a wrong value", i);
    }
    unsigned long taken = atomic_load(&seq);
    CHECK(steps == taken, "%lu steps, %lu numbers taken", steps, taken);
    CHECK(sum == taken * (taken - 1) / 2, "the sums add up to %lu, not %lu", sum,
          taken * (taken - 1) / 2);
    printf("ok %lu\n", taken);
    if (getenv("ATTACH_TEST_HANDLER")) printf("urg %d\n", (int)urgs);
    return 0;
}
