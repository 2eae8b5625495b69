// `-ffunction-sections -Wl,--gc-sections`: functions with probes that nothing calls are dropped by
// the linker, and their table entries with them (each table fragment is tied to its text section).
// The sites of the functions that stay must all be in the table, with both ld.bfd and lld (lld
// defaults to -z start-stop-gc).
//#Objects: main.c extra.c
//#Compile: -ffunction-sections
//#Link: -Wl,--gc-sections
//#Args: 10
//#ExpectStdout: kept 55 385
//#Absent: unused_probe_fn unused_tail_fn extra_unused
//#ExpectKinds: probe is-enabled
#include <stdio.h>
#include <stdlib.h>

extern void __dtrace_sdt_gc__kept(unsigned long);
extern void __dtrace_sdt_gc__dropped(unsigned long);
extern int __dtrace_isenabled_gc__dropped(void);

long extra_squares(long n);

long kept_sum(long n) {
    long s = 0;
    for (long i = 1; i <= n; i++)
        s += i;
    __dtrace_sdt_gc__kept((unsigned long)s);
    return s;
}

/* Unused, external: kept by the compiler, dropped by --gc-sections. */
long unused_probe_fn(long v) {
    if (__dtrace_isenabled_gc__dropped())
        __dtrace_sdt_gc__dropped((unsigned long)v);
    return v + 1;
}

void unused_tail_fn(long v) { __dtrace_sdt_gc__dropped((unsigned long)v * 2); }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 3;
    printf("kept %ld %ld\n", kept_sum(n), extra_squares(n));
    return 0;
}
