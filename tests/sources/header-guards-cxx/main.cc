// The C header's guards in C++ (g++): an inline function and a template instantiated in two
// translation units land in COMDAT groups, and each TU's .bootprof_guard records its own copy's
// guards; the linker keeps one copy, and with it that copy's guards only.
//#Driver: c++
//#Objects: main.cc other.cc
//#Args: 4
//#ExpectStdout: mine 22
//#ExpectStdout: theirs 34
//#ExpectKinds: probe is-enabled
//#ExpectForm: O2 guard
#include "shared.hh"
#include <cstdio>
#include <cstdlib>

long theirs(int n);

int main(int argc, char **argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 2;
    Acc<long> a;
    for (int i = 0; i < n; i++) a.add(bump(i, n));
    std::printf("mine %ld\n", a.total);
    std::printf("theirs %ld\n", theirs(n));
    return 0;
}
