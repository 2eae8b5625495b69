#include "shared.hh"

long theirs(int n) {
    Acc<long> a;
    for (int i = 0; i < n; i++) a.add(bump(i, n) + 2 * i + 1);
    return a.total - n;
}
