/* Built with -finstrument-functions: every function calls __cyg_profile_func_enter on entry and
 * __cyg_profile_func_exit on return; bootprof-link turns both calls into NOPs. */
#include <stdio.h>
#include <string.h>

static size_t count_vowels(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += strchr("aeiou", *s) != NULL;
    return n;
}
static void shout(const char *s) { printf("%s has %zu vowels\n", s, count_vowels(s)); }

int main(int argc, char **argv) {
    shout(argc > 1 ? argv[1] : "bootprof");
    shout("instrumented functions");
    return 0;
}
