// The C++ LTO program: hooks and probes in a class, a template and an exception thrown and caught.
#include <cstdio>
#include <stdexcept>
#include "bootprof.h"

template <typename T> __attribute__((noinline)) T add(T a, T b) {
    BOOTPROF_PROBE(cxx, add, a);
    return a + b;
}

struct Counter {
    int n = 0;
    __attribute__((noinline)) void bump(int by) {
        if (by < 0)
            throw std::runtime_error("negative");
        n = add(n, by);
    }
};

int main() {
    Counter c;
    for (int i = 0; i < 5; i++)
        c.bump(i);
    try {
        c.bump(-1);
    } catch (const std::exception &e) {
        std::printf("caught %s\n", e.what());
    }
    std::printf("count %d\n", c.n);
    return 0;
}
