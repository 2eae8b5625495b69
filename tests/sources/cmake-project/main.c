/* Built by the CMake test in rewriter/tests/integration/cmake.rs. */
#include <stdio.h>

extern void __dtrace_sdt_cmake__start(unsigned long);
extern void __dtrace_sdt_cmake__step(unsigned long, unsigned long);
extern int __dtrace_isenabled_cmake__step(void);

int main(int argc, char **argv) {
    (void)argv;
    __dtrace_sdt_cmake__start((unsigned long)argc);
    unsigned long sum = 0;
    for (unsigned long i = 1; i <= 10; i++) {
        sum += i;
        if (__dtrace_isenabled_cmake__step())
            __dtrace_sdt_cmake__step(i, sum);
    }
    printf("cmake sum %lu\n", sum);
    return 0;
}
