// C++ exceptions thrown through frames whose return bootprof hooked (bootprof run --graph): the
// unwinder must see the real return addresses. Built -O2 -pg -mfentry; argv[1]:
//   catch     thrown by the program (__cxa_throw), by the C++ library (std::vector::at, whose
//             throw is in libstdc++), and rethrown, each through hooked frames with destructors
//             and caught several frames up; the program goes on calling hooked functions
//   uncaught  thrown through hooked frames and never caught: std::terminate (SIGABRT), as
//             without bootprof
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#define NOINLINE __attribute__((noinline))
#define KEEP(x) __asm__ volatile("" : "+r"(x))

static long destroyed;

struct Guard {
    long n;
    NOINLINE explicit Guard(long n) : n(n) {}
    NOINLINE ~Guard() { destroyed += n; }
};

NOINLINE long x_deep(long x) {
    Guard g(1);
    if (x > 0) throw std::runtime_error("deep");
    return x;
}
NOINLINE long x_mid(long x) {
    Guard g(10);
    long r = x_deep(x + 1);
    KEEP(r);
    return r + 1;
}
NOINLINE long x_after(long x) {
    KEEP(x);
    return x * 2;
}
NOINLINE long x_catch(long x) {
    try {
        return x_mid(x);
    } catch (const std::runtime_error &e) {
        return x_after(std::strlen(e.what()));
    }
}
NOINLINE long v_at(const std::vector<long> &v, long i) {
    long r = v.at(i);
    KEEP(r);
    return r;
}
NOINLINE long v_catch(long i) {
    std::vector<long> v(3, 5);
    try {
        return v_at(v, i);
    } catch (const std::out_of_range &) {
        return x_after(-1);
    }
}
NOINLINE long r_inner(long x) {
    try {
        return x_mid(x);
    } catch (...) {
        destroyed += 100;
        throw;
    }
}
NOINLINE long r_outer(long x) {
    try {
        return r_inner(x);
    } catch (const std::exception &) {
        return x_after(3);
    }
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    if (std::strcmp(what, "catch") == 0) {
        std::printf("caught %ld\n", x_catch(1));
        std::printf("library %ld\n", v_catch(7));
        std::printf("rethrown %ld\n", r_outer(2));
        std::printf("destroyed %ld\n", destroyed);
        return 0;
    }
    if (std::strcmp(what, "uncaught") == 0) {
        std::printf("start\n");
        std::fflush(stdout);
        return (int)x_mid(1);
    }
    std::fprintf(stderr, "usage: graph_throw catch|uncaught\n");
    return 2;
}
