#!/usr/bin/env python3
"""Writes a C program with N -pg -mfentry functions (one in four with a named probe) that times
reading its site table (the first call that needs the sites; the runtime reads tables only then)
and then enabling and disabling all its sites in both modes: many.py N > many.c"""
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
print('#include <stdio.h>\n#include <time.h>\n#include "bootprof.h"')
for i in range(n):
    probe = f"BOOTPROF_PROBE(gen, p{i}, x);" if i % 4 == 0 else ""
    print(f"__attribute__((noinline)) long f{i}(long x) {{ {probe} return x * {i % 7 + 1} + {i}; }}")
print("""
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(void) {
    const char *names[] = {"", "trap", "call"};
    double r0 = now();
    int sites = bootprof_site_count();
    double r1 = now();
    printf("reading the table: %d sites, %.2f M sites/s (%.1f ms)\\n", sites, sites / (r1 - r0) / 1e6, (r1 - r0) * 1e3);
    for (int mode = 1; mode <= 2; mode++) {
        double t0 = now();
        int n = bootprof_enable_mode("*", mode);
        double t1 = now();
        int m = bootprof_disable("*");
        double t2 = now();
        if (n <= 0 || m != n) { fprintf(stderr, "enable %d disable %d: %s\\n", n, m, bootprof_last_error()); return 1; }
        printf("%s mode: %d sites, enable %.2f M sites/s (%.1f ms), disable %.2f M sites/s (%.1f ms)\\n",
               names[mode], n, n / (t1 - t0) / 1e6, (t1 - t0) * 1e3, m / (t2 - t1) / 1e6, (t2 - t1) * 1e3);
    }
    return 0;
}""")
