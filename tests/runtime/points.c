/* Profile points and who reads them: `leaf` called 3 times, the table printed to stdout, `leaf`
 * called twice more, the table printed again. With "count" the program asks for the points
 * (bootprof_count_points) before the first call. Built -pg -mfentry (under --graph) and
 * -finstrument-functions. */
#include <bootprof.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) static int leaf(int x) {
    __asm__ volatile("");
    return x * 3;
}

static void table(void) {
    fflush(stdout);
    bootprof_print_points(1);
    printf("--\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    int s = 0;
    if (argc > 1 && strcmp(argv[1], "count") == 0)
        bootprof_count_points();
    for (int i = 0; i < 3; i++)
        s += leaf(i);
    table();
    for (int i = 0; i < 2; i++)
        s += leaf(i);
    table();
    printf("%d\n", s);
    return 0;
}
