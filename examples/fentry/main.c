/* Built with -pg -mfentry: every function starts with a call to __fentry__, which bootprof-link
 * turns into a NOP (and keeps glibc's gmon out: no gmon.out is written). */
#include <stdio.h>

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
static int square(int x) { return x * x; }
int compute(int n) { return fib(n) + square(n); }

int main(void) {
    int sum = 0;
    for (int i = 0; i < 20; i++) sum += compute(i % 15);
    printf("sum: %d\n", sum);
    return 0;
}
