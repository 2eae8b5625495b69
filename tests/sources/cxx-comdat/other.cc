#include "probes.hh"

long right_side(int n) {
    Ring<long, 4> r;
    Ring<int, 8> q;
    for (int i = 1; i <= n; i++) {
        r.push(i * 11);
        q.push(i);
    }
    long s = r.sum() + q.sum() - q.sum();
    announce("right", s);
    return s;
}
