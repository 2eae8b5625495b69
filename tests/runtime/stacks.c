/* Call stacks at hits: main -> st_a -> st_b -> st_c, where st_c hits the probe st:leaf; st_b
 * also calls st_tail, whose last statement is the probe st:tail (a tail jump when the probe is a
 * plain call and no exit hook follows it), and hits st:other itself. Every function keeps the
 * address it returns to (__builtin_return_address(0)), and the program prints them with the
 * functions' own addresses, for the test to compare with the stacks the runtime recorded.
 * Compiled with -fno-omit-frame-pointer, and -pg -mfentry or -finstrument-functions, so that
 * every function holds a hook site (and its name is known to the reports).
 *   stacks N    runs the chain N times */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include "bootprof.h"

/* Where each function returns to. */
static void *ret_c, *ret_tail, *ret_b, *ret_a, *ret_main;
static long total;

__attribute__((noipa)) void st_c(long i) {
    ret_c = __builtin_return_address(0);
    BOOTPROF_PROBE(st, leaf, i);
    total += i;
}

__attribute__((noipa)) void st_tail(long i) {
    ret_tail = __builtin_return_address(0);
    total += i;
    BOOTPROF_PROBE(st, tail, i);
}

__attribute__((noipa)) void st_b(long i) {
    ret_b = __builtin_return_address(0);
    BOOTPROF_PROBE(st, other, i);
    st_c(i);
    st_tail(i);
    __asm__ volatile("" ::: "memory"); /* the calls above are not tail calls */
}

__attribute__((noipa)) void st_a(long i) {
    ret_a = __builtin_return_address(0);
    st_b(i);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    ret_main = __builtin_return_address(0);
    long n = argc > 1 ? atol(argv[1]) : 1;
    for (long i = 0; i < n; i++) st_a(i);
    CHECK(total == n * (n - 1), "total %ld", total);
    printf("fn main %p\nfn st_a %p\nfn st_b %p\nfn st_c %p\nfn st_tail %p\n", (void *)main,
           (void *)st_a, (void *)st_b, (void *)st_c, (void *)st_tail);
    printf("ret main %p\nret st_a %p\nret st_b %p\nret st_c %p\nret st_tail %p\n", ret_main, ret_a,
           ret_b, ret_c, ret_tail);
    return 0;
}
