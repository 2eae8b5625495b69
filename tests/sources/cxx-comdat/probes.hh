// Inline functions and templates used from both translation units: each object carries its own
// copy in a COMDAT group and the linker keeps one; the kept copy's sites are in the table once.
#pragma once
#include <cstdio>

extern "C" void __dtrace_sdt_cxx__push(unsigned long, unsigned long);
extern "C" void __dtrace_sdt_cxx__total(unsigned long);
extern "C" int __dtrace_isenabled_cxx__push(void);

template <typename T, int N>
class Ring {
  public:
    __attribute__((noinline)) void push(T v) {
        if (__dtrace_isenabled_cxx__push())
            __dtrace_sdt_cxx__push((unsigned long)v, (unsigned long)len_);
        data_[(start_ + len_) % N] = v;
        if (len_ < N)
            len_++;
        else
            start_ = (start_ + 1) % N;
    }
    __attribute__((noinline)) T sum() const {
        T s = T();
        for (int i = 0; i < len_; i++)
            s += data_[(start_ + i) % N];
        __dtrace_sdt_cxx__total((unsigned long)s);
        return s;
    }

  private:
    T data_[N] = {};
    int start_ = 0, len_ = 0;
};

__attribute__((noinline)) inline void announce(const char *who, long v) {
    std::printf("%s %ld\n", who, v);
    __dtrace_sdt_cxx__total((unsigned long)v);
}

long left_side(int n);
long right_side(int n);
