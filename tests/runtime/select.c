/* Selection: patterns, notrace, unknown and malformed patterns, disable restores NOPs; text
 * writes that fail leave everything as it was. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include "bootprof.h"

__attribute__((noinline)) static void f1(void) { BOOTPROF_PROBE(sel, alpha, 1); }
__attribute__((noinline)) static void f2(void) { BOOTPROF_PROBE(sel, beta, 2); }
__attribute__((noinline)) static void f3(void) { BOOTPROF_PROBE(other, alpha_lock, 3); }

int main(int argc, char **argv) {
    int must_fail = argc > 1 && argv[1][0] == 'f';
    if (must_fail) {
        CHECK(bootprof_enable("sel:*") == -1, "enable should fail");
        printf("error: %s\n", bootprof_last_error());
        struct text_cmp t = text_vs_file();
        CHECK(t.differing == 0, "a failed enable changed %ld bytes", t.differing);
        f1();
        CHECK(bootprof_hits("*") == 0, "hits after a failed enable");
        printf("failed enable left the code untouched\n");
        return 0;
    }
    CHECK(bootprof_enable("nothing:here") == 0, "unknown pattern matches nothing");
    CHECK(bootprof_enable("a*b") == -1, "malformed pattern");
    printf("malformed: %s\n", bootprof_last_error());
    CHECK(bootprof_notrace("*lock") == 0, "notrace");
    CHECK(bootprof_enable("*alpha*") == PER_PROBE, "notrace wins: only sel:alpha");
    CHECK(bootprof_enable("sel:*") == PER_PROBE, "sel:beta more");
    f1(); f2(); f3();
    CHECK(bootprof_hits("sel:*") == 2 && bootprof_hits("other:*") == 0, "hits");
    bootprof_clear_notrace();
    /* The three calls change mode; of the guards (enabled whatever the mode) only other's is new. */
    CHECK(bootprof_enable_mode("*", BOOTPROF_MODE_CALL) == 3 + BOOTPROF_GUARDS, "all three, switching mode");
    f1(); f2(); f3();
    CHECK(bootprof_hits("*") == 5, "hits in call mode: %ld", (long)bootprof_hits("*"));
    size_t n = bootprof_site_count();
    for (size_t i = 0; i < n; i++) {
        struct bootprof_site s;
        CHECK(bootprof_site_info(i, &s) == 0 && s.mode == BOOTPROF_MODE_CALL, "site %zu mode", i);
        printf("site %u %s:%s in %s+%u hits %lu\n", s.id, s.provider, s.name, s.function, s.func_offset, (unsigned long)s.hits);
    }
    CHECK(bootprof_disable("*") == 3 * PER_PROBE, "disable all");
    struct text_cmp t = text_vs_file();
    CHECK(t.differing == 0, "%ld bytes differ after disable", t.differing);
    printf("selection ok; text identical after disable\n");
    return 0;
}
