// The executable of the CMake C++ test (rewriter/tests/integration/cmake.rs): three squares
// from the library, Shape::twice() through the library once per square and here on the first.
#include <cstdio>
#include "shapes.h"

int main() {
    geo::Shape *shapes[3];
    for (int i = 0; i < 3; i++) shapes[i] = geo::make_square(i + 1);
    long total = geo::total_twice(shapes, 3);
    long first = shapes[0]->twice();
    for (geo::Shape *s : shapes) delete s;
    std::printf("cmake c++ total %ld first %ld\n", total, first);
    return 0;
}
