// Compiled without -flto: machine code on the same line as the IR.
#include "bootprof.h"

__attribute__((noinline)) int plain(int x) {
    BOOTPROF_PROBE(lib, plain, x);
    return x - 1;
}
