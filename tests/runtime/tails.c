/* Tail sites in call mode: a probe as a function's last statement compiles to `jmp probe` (with
 * BOOTPROF_CALL_SITES), and -finstrument-functions ends a void function with
 * `jmp __cyg_profile_func_exit`. Such a jump leaves no return address; each hit must still be
 * credited to its own site (bootprof-link gives every tail site its own thunk). Three functions
 * with the same probe and three void instrumented functions each run a known number of times;
 * the handler counts hits by the function of the site. Run with "trap" or "call"; both must give
 * the same counts. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include "bootprof.h"

#define NF 3
static const char *names[NF] = {"t_one", "t_two", "t_three"};
static const char *void_names[NF] = {"v_one", "v_two", "v_three"};
static long probe_hits[NF], exit_hits[NF], other;

__attribute__((no_instrument_function)) static void count(const struct bootprof_hit *h, void *c) {
    (void)c;
    long *table = h->kind == BOOTPROF_KIND_CYG_EXIT ? exit_hits : probe_hits;
    const char **which = h->kind == BOOTPROF_KIND_CYG_EXIT ? void_names : names;
    for (int i = 0; i < NF; i++)
        if (strcmp(h->function, which[i]) == 0) {
            table[i]++;
            return;
        }
    if (h->kind == BOOTPROF_KIND_PROBE || h->kind == BOOTPROF_KIND_CYG_EXIT) other++;
}

/* Probes in tail position (the file is compiled with -DBOOTPROF_CALL_SITES). */
__attribute__((noinline, no_instrument_function)) void t_one(long x) { BOOTPROF_PROBE(tail, p, x); }
__attribute__((noinline, no_instrument_function)) void t_two(long x) { BOOTPROF_PROBE(tail, p, x + 1); }
__attribute__((noinline, no_instrument_function)) void t_three(long x) { BOOTPROF_PROBE(tail, p, x + 2); }

/* Instrumented void functions: their exit hook is a tail jump. */
volatile long sink;
__attribute__((noinline)) void v_one(long x) { sink += x; }
__attribute__((noinline)) void v_two(long x) { sink ^= x; }
__attribute__((noinline)) void v_three(long x) { sink -= x; }

__attribute__((no_instrument_function)) int main(int argc, char **argv) {
    int mode = argc > 1 && argv[1][0] == 'c' ? BOOTPROF_MODE_CALL : BOOTPROF_MODE_TRAP;
    CHECK(bootprof_add_handler("*", count, NULL) >= 0, "%s", bootprof_last_error());
    CHECK(bootprof_enable_mode("tail:*", mode) == 3, "enable tail:*: %s", bootprof_last_error());
    CHECK(bootprof_enable_mode("v_*", mode) == 6, "enable v_*: %s", bootprof_last_error());
    for (int i = 0; i < 5; i++) t_one(i);
    for (int i = 0; i < 7; i++) t_two(i);
    for (int i = 0; i < 11; i++) t_three(i);
    for (int i = 0; i < 13; i++) v_one(i);
    for (int i = 0; i < 17; i++) v_two(i);
    for (int i = 0; i < 19; i++) v_three(i);
    long want_p[NF] = {5, 7, 11}, want_e[NF] = {13, 17, 19};
    for (int i = 0; i < NF; i++) {
        CHECK(probe_hits[i] == want_p[i], "%s: %ld probe hits, want %ld", names[i], probe_hits[i], want_p[i]);
        CHECK(exit_hits[i] == want_e[i], "%s: %ld exit hits, want %ld", void_names[i], exit_hits[i], want_e[i]);
    }
    CHECK(other == 0, "%ld hits credited to other functions", other);
    printf("tail sites: every hit credited to its own function (%s mode)\n", mode == BOOTPROF_MODE_CALL ? "call" : "trap");
    return 0;
}
