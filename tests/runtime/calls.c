/* A deterministic call tree for comparing bootprof's function tracer with uftrace's. */
#include <stdio.h>
static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
static int square(int x) { return x * x; }
__attribute__((noinline)) static int leaf(int x) { return x ^ 0x55; }
static int twice(int x) { return leaf(x) + leaf(x + 1); }
int compute(int n) { return fib(n) + square(n) + (n % 2 ? twice(n) : 0); }
int main(void) {
    int s = 0;
    for (int i = 0; i < 6; i++) s += compute(i);
    printf("sum: %d\n", s);
    return 0;
}
