// C++: templates and inline functions (COMDAT groups, `.text._ZN...` sections) calling probes
// from two translation units, compiled and linked with c++.
//#Driver: c++
//#Objects: main.cc other.cc
//#Args: 6
//#ExpectStdout: left 18
//#ExpectStdout: right 198
//#ExpectStdout: both 216
//#ExpectKinds: probe is-enabled
#include "probes.hh"
#include <cstdlib>

long left_side(int n) {
    Ring<long, 4> r;
    for (int i = 1; i <= n; i++)
        r.push(i * 1);
    long s = r.sum();
    announce("left", s);
    return s;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 3;
    long a = left_side(n), b = right_side(n);
    announce("both", a + b);
    return 0;
}
