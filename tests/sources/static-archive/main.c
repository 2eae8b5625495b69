// A static library with probes in some members and not in others. `unused.c` is a member nothing
// refers to: archive semantics must hold, so it is not pulled in (its function is absent from the
// output, and so are its sites).
//#Objects: main.c
//#Archive: libparts.a parse.c plain.c unused.c
//#Args: 12,7,30 5
//#ExpectStdout: 12,7,30 -> 3 numbers, max 30, digits 5
//#ExpectStdout: 5 -> 1 numbers, max 5, digits 1
//#Absent: archive_unused_function archive_unused_helper
//#ExpectKinds: probe is-enabled
#include <stdio.h>

extern void __dtrace_sdt_main__line(unsigned long, unsigned long);

int parse_numbers(const char *s, long *out, int max);
long max_of(const long *v, int n);
int count_digits(const char *s);

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        long v[16];
        int n = parse_numbers(argv[i], v, 16);
        __dtrace_sdt_main__line((unsigned long)i, (unsigned long)n);
        printf("%s -> %d numbers, max %ld, digits %d\n", argv[i], n, max_of(v, n),
               count_digits(argv[i]));
    }
    return 0;
}
