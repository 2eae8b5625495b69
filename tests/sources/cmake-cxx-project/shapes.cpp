// The library of the CMake C++ test (rewriter/tests/integration/cmake.rs).
#include "shapes.h"

namespace geo {

Shape::~Shape() {}

Square::Square(long s) : side(s) {}

long Square::area() const { return side * side; }

Shape *make_square(long side) { return new Square(side); }

long total_twice(Shape *const *shapes, int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) sum += shapes[i]->twice();
    return sum;
}

} // namespace geo
