// C++: inline functions and template instances land in COMDAT groups.
extern "C" void __dtrace_sdt_cxx__enter(const char *);
extern "C" int __dtrace_isenabled_cxx__enter(void);

template <typename T> struct Box {
    T v;
    T get() const
    {
        if (__dtrace_isenabled_cxx__enter())
            __dtrace_sdt_cxx__enter("Box::get");
        return v;
    }
};

inline int twice(int x)
{
    __dtrace_sdt_cxx__enter("twice");
    return 2 * x;
}

int use_int(int x) { return Box<int>{x}.get() + twice(x); }
long use_long(long x) { return Box<long>{x}.get(); }
