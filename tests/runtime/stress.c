/* Stress: threads run probe sites while others enable and disable them, in both modes.
 *   stress SECONDS [call|trap]
 * Part 1 (exact): per epoch, enable st:a (alternating trap/call), let every worker run ITER
 *   probe calls, check the handler saw exactly workers*ITER hits; disable; run again, check zero.
 * Part 2 (chaos): hammer threads run functions with st:b sites (plain, tail, is-enabled, in the
 *   middle of arithmetic) and check their results while a toggler flips st:b between trap, call
 *   and disabled as fast as it can; after a final disable no hit may arrive.
 * Part 3: st:b enabled in call mode while the hammers run: its is-enabled sites must be in the
 *   mode the second argument names (call, the default: their NOP is one instruction; trap: the
 *   table was written before version 3, their NOP is two).
 * At the end every site is disabled and the loaded code must equal the file byte for byte. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bootprof.h"

#define WORKERS 3
#define ITER 20000

static atomic_long hits_a, hits_b;
static atomic_int epoch, done_workers, stop;
static atomic_long bad_results, calls_b;

static void count_a(const struct bootprof_hit *h, void *c) { (void)h; (void)c; atomic_fetch_add(&hits_a, 1); }
static void count_b(const struct bootprof_hit *h, void *c) { (void)h; (void)c; atomic_fetch_add(&hits_b, 1); }

__attribute__((noinline)) static long probe_a(long i) { BOOTPROF_PROBE(st, a, i); return i ^ 0x5a; }

static void *worker(void *arg) {
    int seen = 0;
    long sink = (long)arg;
    for (;;) {
        int e;
        while ((e = atomic_load(&epoch)) == seen) {
            if (atomic_load(&stop)) return (void *)sink;
            sched_yield();
        }
        seen = e;
        for (long i = 0; i < ITER; i++) sink += probe_a(i);
        atomic_fetch_add(&done_workers, 1);
    }
}

__attribute__((noinline)) static long b_plain(long x) { long y = x * 7 + 3; BOOTPROF_PROBE(st, b, y, x); return y - x; }
__attribute__((noinline)) static void b_tail(long x) { BOOTPROF_PROBE(st, b, x); }
__attribute__((noinline)) static long b_enabled(long x) {
    long r = x + 1;
    if (BOOTPROF_ENABLED(st, b)) r += 0; /* the branch must not change the result */
    return r;
}

static void *hammer(void *arg) {
    (void)arg;
    long x = 1;
    while (!atomic_load(&stop)) {
        long v = b_plain(x);
        b_tail(x);
        long w = b_enabled(x);
        if (v != x * 6 + 3 || w != x + 1) atomic_fetch_add(&bad_results, 1);
        x = (x * 1103515245 + 12345) & 0xffffff;
        atomic_fetch_add(&calls_b, 1);
    }
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 3;
    int is_enabled_mode = argc > 2 && strcmp(argv[2], "trap") == 0 ? BOOTPROF_MODE_TRAP : BOOTPROF_MODE_CALL;
    CHECK(bootprof_add_handler("st:a", count_a, NULL) >= 0, "%s", bootprof_last_error());
    CHECK(bootprof_add_handler("st:b", count_b, NULL) >= 0, "%s", bootprof_last_error());
    pthread_t w[WORKERS], h[2];
    for (long i = 0; i < WORKERS; i++) pthread_create(&w[i], NULL, worker, (void *)i);
    for (int i = 0; i < 2; i++) pthread_create(&h[i], NULL, hammer, NULL);

    /* Toggle st:b in this thread between the exact epochs of st:a. */
    double end = now() + seconds;
    long epochs = 0, toggles = 0;
    while (now() < end) {
        int mode = (epochs & 1) ? BOOTPROF_MODE_CALL : BOOTPROF_MODE_TRAP;
        for (int enabled = 1; enabled >= 0; enabled--) {
            long before = atomic_load(&hits_a);
            atomic_store(&done_workers, 0);
            if (enabled) CHECK(bootprof_enable_mode("st:a", mode) == PER_PROBE, "enable st:a");
            atomic_fetch_add(&epoch, 1);
            while (atomic_load(&done_workers) < WORKERS) {
                /* meanwhile, chaos on st:b */
                int m = (toggles % 3 == 0) ? BOOTPROF_MODE_TRAP : BOOTPROF_MODE_CALL;
                if (toggles % 2 == 0) CHECK(bootprof_enable_mode("st:b", m) >= 0, "%s", bootprof_last_error());
                else CHECK(bootprof_disable("st:b") >= 0, "%s", bootprof_last_error());
                toggles++;
            }
            long got = atomic_load(&hits_a) - before;
            long want = enabled ? (long)WORKERS * ITER : 0;
            CHECK(got == want, "epoch %ld mode %d enabled %d: %ld hits, want %ld", epochs, mode, enabled, got, want);
            if (enabled) CHECK(bootprof_disable("st:a") == PER_PROBE, "disable st:a");
        }
        epochs++;
    }
    CHECK(bootprof_enable_mode("st:b", BOOTPROF_MODE_CALL) >= 0, "%s", bootprof_last_error());
    long is_enabled = 0;
    for (size_t i = 0; i < bootprof_site_count(); i++) {
        struct bootprof_site s;
        CHECK(bootprof_site_info(i, &s) == 0, "%s", bootprof_last_error());
        if (s.kind != BOOTPROF_KIND_ISENABLED || strcmp(s.provider, "st") != 0) continue;
        CHECK(s.mode == is_enabled_mode, "is-enabled site %#lx in mode %d, want %d", (unsigned long)s.address, s.mode, is_enabled_mode);
        is_enabled++;
    }
    CHECK(is_enabled > 0, "no is-enabled site of st:b");
    CHECK(bootprof_disable("st:b") >= 0, "final disable");
    usleep(20000);
    long settled = atomic_load(&hits_b);
    long calls = atomic_load(&calls_b);
    while (atomic_load(&calls_b) < calls + 10000) sched_yield();
    CHECK(atomic_load(&hits_b) == settled, "st:b hit while disabled: %ld -> %ld", settled, atomic_load(&hits_b));
    atomic_store(&stop, 1);
    for (int i = 0; i < WORKERS; i++) pthread_join(w[i], NULL);
    for (int i = 0; i < 2; i++) pthread_join(h[i], NULL);
    CHECK(atomic_load(&bad_results) == 0, "%ld wrong results while patching", atomic_load(&bad_results));
    struct text_cmp t = text_vs_file();
    CHECK(t.compared > 0 && t.differing == 0, "%ld of %ld code bytes differ from the file", t.differing, t.compared);
    printf("exact: %ld epochs ok; chaos: %ld toggles, %ld st:b calls, %ld st:b hits; %ld is-enabled sites in mode %d; text identical (%ld bytes)\n",
           epochs, toggles, atomic_load(&calls_b), atomic_load(&hits_b), is_enabled, is_enabled_mode, t.compared);
    return 0;
}
