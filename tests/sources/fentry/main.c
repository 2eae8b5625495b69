// `-pg -mfentry`: every function starts with a call to `__fentry__` (through the GOT in a PIE,
// `ff 15`; direct `e8` with -fno-pie). `-pg` is on the link line too, as users write it:
// bootprof-link must drop it, so glibc's gcrt1.o and gmon (which writes gmon.out) stay out.
//#Objects: main.c sort.c
//#Compile: -pg -mfentry
//#Link: -pg
//#Args: 9 3 7 1 8 2
//#ExpectStdout: sorted 1 2 3 7 8 9
//#ExpectStdout: fib(20) = 6765
//#ExpectKinds: fentry probe
#include <stdio.h>
#include <stdlib.h>

extern void __dtrace_sdt_fentry__sorted(unsigned long, unsigned long);

void sort_longs(long *v, int n);

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(int argc, char **argv) {
    long v[64];
    int n = 0;
    for (int i = 1; i < argc && n < 64; i++)
        v[n++] = strtol(argv[i], NULL, 10);
    sort_longs(v, n);
    __dtrace_sdt_fentry__sorted((unsigned long)v, (unsigned long)n);
    printf("sorted");
    for (int i = 0; i < n; i++)
        printf(" %ld", v[i]);
    printf("\nfib(20) = %d\n", fib(20));
    return 0;
}
