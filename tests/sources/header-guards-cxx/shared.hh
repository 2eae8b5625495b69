#pragma once
#include "bootprof.h"
#include <string>

inline long bump(int i, int n) {
    std::string tag("bump");
    BOOTPROF_PROBE(cxx, bump, i, tag.size());
    if (BOOTPROF_ENABLED(cxx, detail)) BOOTPROF_PROBE(cxx, detail, n);
    return i + n;
}

template <typename T> struct Acc {
    T total = 0;
    void add(T x) {
        BOOTPROF_PROBE(cxx, add, x);
        total += x;
    }
};
