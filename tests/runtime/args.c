/* Arguments and registers: probes with 0 to 6 arguments fire with exactly those arguments in both
 * modes, and the code around them computes the same results enabled as disabled: values the
 * compiler keeps in registers across the probe (general, vector, x87) survive it. Run with "trap"
 * or "call". */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include "bootprof.h"

static unsigned long seen[8][7]; /* per probe: hits, then the arguments of the last hit */
static void record(const struct bootprof_hit *h, void *cookie) {
    unsigned long *s = seen[(long)cookie];
    s[0]++;
    for (int i = 0; i < 6; i++) s[1 + i] = h->args[i];
}

__attribute__((noinline)) static unsigned long mix(unsigned long a, unsigned long b, unsigned long c,
                                                   unsigned long d, unsigned long e, unsigned long f) {
    unsigned long x = a * 3 + b, y = c ^ d, z = e - f;
    /* KEEP makes every value sit in a register at that point, after the probe before it: the
     * compiler keeps them in registers across the probe (the argument registers among them), so
     * a probe that changed a register it does not declare changed would change the result. */
#define KEEP()                                                                                     \
    __asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f), "+r"(x), "+r"(y),  \
                     "+r"(z))
    KEEP();
    BOOTPROF_PROBE(args, zero);
    KEEP();
    BOOTPROF_PROBE(args, one, a);
    KEEP();
    BOOTPROF_PROBE(args, two, a, b);
    KEEP();
    BOOTPROF_PROBE(args, three, f, e, d);
    KEEP();
    BOOTPROF_PROBE(args, four, a + 1, b + 1, c + 1, d + 1);
    KEEP();
    BOOTPROF_PROBE(args, five, x, y, z, a, b);
    KEEP();
    BOOTPROF_PROBE(args, six, a, b, c, d, e, f);
    KEEP();
    return x * 7 + y * 11 + z * 13 + a + b + c + d + e + f;
}

__attribute__((noinline)) static double fp(double u, double v, long double w) {
    double s = u * v, t = u + v;
    long double q = w * 3;
    BOOTPROF_PROBE(args, fp, (unsigned long)u);
    return s * t + (double)(q / 2) + u / v;
}

int main(int argc, char **argv) {
    int mode = argc > 1 && argv[1][0] == 'c' ? BOOTPROF_MODE_CALL : BOOTPROF_MODE_TRAP;
    const char *names[8] = {"args:zero", "args:one", "args:two", "args:three",
                            "args:four", "args:five", "args:six", "args:fp"};
    unsigned long want = mix(1, 2, 3, 4, 5, 6);
    double want_fp = fp(1.5, 2.25, 3.0L);
    for (long i = 0; i < 8; i++)
        CHECK(bootprof_add_handler(names[i], record, (void *)i) >= 0, "%s", bootprof_last_error());
    CHECK(bootprof_enable_mode("args:*", mode) == 8 * PER_PROBE, "%s", bootprof_last_error());
    CHECK(mix(1, 2, 3, 4, 5, 6) == want, "mix changed when enabled");
    CHECK(fp(1.5, 2.25, 3.0L) == want_fp, "fp changed when enabled");
    unsigned long expect[8][6] = {
        {0}, {1}, {1, 2}, {6, 5, 4}, {2, 3, 4, 5}, {1 * 3 + 2, 3 ^ 4, 5 - 6, 1, 2}, {1, 2, 3, 4, 5, 6},
        {1}};
    int nargs[8] = {0, 1, 2, 3, 4, 5, 6, 1};
    for (int p = 0; p < 8; p++) {
        CHECK(seen[p][0] == 1, "%s: %lu hits", names[p], seen[p][0]);
        for (int i = 0; i < nargs[p]; i++)
            CHECK(seen[p][1 + i] == expect[p][i], "%s: argument %d is %lu, want %lu", names[p], i,
                  seen[p][1 + i], expect[p][i]);
    }
    CHECK(bootprof_disable("*") == 8 * PER_PROBE, "disable");
    CHECK(mix(1, 2, 3, 4, 5, 6) == want && fp(1.5, 2.25, 3.0L) == want_fp, "changed after disable");
    struct text_cmp t = text_vs_file();
    CHECK(t.differing == 0, "%ld bytes differ after disable", t.differing);
    printf("arguments and registers: ok (%s mode)\n", mode == BOOTPROF_MODE_CALL ? "call" : "trap");
    return 0;
}
