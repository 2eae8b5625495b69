// A small C++ program whose functions have mangled names of every common shape: namespaces,
// classes, const members, overloads, a template, an operator, an anonymous namespace and a
// constructor. Built -pg -mfentry, each function is a hook site; the test counts the calls.
#include <cstdio>
#include <vector>

namespace geo {

struct Shape {
    virtual ~Shape() {}
    virtual double area() const = 0;
};

struct Circle : Shape {
    double r;
    explicit Circle(double r) : r(r) {}
    double area() const override { return 3.0 * r * r; }
};

struct Square : Shape {
    double side;
    explicit Square(double side) : side(side) {}
    double area() const override { return side * side; }
};

__attribute__((noinline)) int scale(int v) { return v * 2; }
__attribute__((noinline)) double scale(double v) { return v * 2.5; }

template <typename T> __attribute__((noinline)) T total(const std::vector<T> &values) {
    T sum = 0;
    for (const T &v : values) sum += v;
    return sum;
}

struct Adder {
    int base;
    __attribute__((noinline)) int operator()(int v) const { return base + v; }
};

} // namespace geo

namespace {
__attribute__((noinline)) int helper(int v) { return v + 1; }
} // namespace

int main() {
    geo::Circle c(2.0);
    geo::Square s(3.0);
    std::vector<const geo::Shape *> shapes = {&c, &s, &c};
    double areas = 0;
    for (const geo::Shape *shape : shapes) areas += shape->area();
    int ints = geo::scale(1) + geo::scale(2);
    double doubles = geo::scale(2.0);
    geo::Adder add{10};
    int added = add(helper(1));
    std::printf("areas %.1f ints %d doubles %.1f total %d added %d\n", areas, ints, doubles,
                geo::total(std::vector<int>{1, 2, 3}), added);
    return 0;
}
