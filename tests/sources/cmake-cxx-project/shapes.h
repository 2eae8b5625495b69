// Built by the CMake test in rewriter/tests/integration/cmake.rs (with -O0, so that every call
// below is a call and each function's hits can be counted from the source).
#pragma once

namespace geo {

struct Shape {
    virtual ~Shape();
    virtual long area() const = 0;
    // Inline: the library and the executable each carry a copy in a COMDAT group.
    long twice() const { return 2 * area(); }
};

struct Square : Shape {
    long side;
    explicit Square(long s);
    long area() const override;
};

Shape *make_square(long side);
long total_twice(Shape *const *shapes, int n);

} // namespace geo
