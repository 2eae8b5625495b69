// `-finstrument-functions`: each function calls `__cyg_profile_func_enter(this_fn, call_site)` on
// entry and `__cyg_profile_func_exit` on exit (sometimes as a tail `jmp` at -O2). The argument
// set-up stays; only the calls become NOPs.
//#Objects: main.c shapes.c
//#Compile: -finstrument-functions
//#Args: 3 4
//#ExpectStdout: rect 3x4 area 12 perimeter 14
//#ExpectStdout: square 4 area 16
//#ExpectKinds: cyg-enter cyg-exit
#include <stdio.h>
#include <stdlib.h>

struct shape { long w, h; };

long area(const struct shape *s);
long perimeter(const struct shape *s);
struct shape square(long side);

int main(int argc, char **argv) {
    struct shape r = {argc > 1 ? atol(argv[1]) : 1, argc > 2 ? atol(argv[2]) : 1};
    printf("rect %ldx%ld area %ld perimeter %ld\n", r.w, r.h, area(&r), perimeter(&r));
    struct shape s = square(r.h);
    printf("square %ld area %ld\n", s.w, area(&s));
    return 0;
}
