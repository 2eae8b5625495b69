// `-pg` without -mfentry: `mcount` is called after the prologue (`ff 15` + GOTPCRELX in a PIE,
// `e8` + PLT32 with -fno-pie). With -pg also on the link line, the plain build runs gmon and writes
// gmon.out; the bootprof build must not.
//#Objects: main.c queue.c
//#Compile: -pg
//#Link: -pg
//#Args: 5
//#ExpectStdout: pushed 5 popped 5 sum 15
//#ExpectStdout: collatz(27) = 111
//#ExpectKinds: mcount
#include <stdio.h>
#include <stdlib.h>

void queue_push(int v);
int queue_pop(int *out);

static int collatz(long n) {
    int steps = 0;
    while (n != 1) {
        n = (n % 2) ? 3 * n + 1 : n / 2;
        steps++;
    }
    return steps;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3, popped = 0, sum = 0, v;
    for (int i = 1; i <= n; i++)
        queue_push(i);
    while (queue_pop(&v)) {
        popped++;
        sum += v;
    }
    printf("pushed %d popped %d sum %d\n", n, popped, sum);
    printf("collatz(27) = %d\n", collatz(27));
    return 0;
}
