/* Built -O2 -finstrument-functions: gcc inlines square() and twice() into outer() and still
 * calls the hooks for them there, inside outer()'s code, with their own addresses as this_fn
 * (and emits an out-of-line copy of each, whose address that is). A trace names those calls
 * after the inlined functions, not after outer(). */
#include <stdio.h>
#include <stdlib.h>

static int square(int x) { return x * x; }

static inline int twice(int v) { return v * 2; }

__attribute__((noinline)) int outer(int a) { return square(a) + twice(a); }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3, sum = 0;
    for (int i = 0; i < n; i++)
        sum += outer(i);
    printf("%d\n", sum);
    return 0;
}
