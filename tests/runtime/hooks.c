/* Function hooks: a hit gives the hooked function's address and its parent (where it returns
 * to), checked against what the function itself sees with __builtin_return_address(0); a handler
 * that calls hooked functions is not re-entered; after patching, the code pages have their
 * original protection (r-x) again. Compiled with -pg -mfentry (fentry) or -pg (mcount). */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <stdint.h>
#include "bootprof.h"

#define N 8
static uint64_t seen_fn[N], seen_parent[N];
static void *want_parent[N];
static int nseen, nested;

__attribute__((noinline)) static int helper(int x) { return x + 1; }
__attribute__((noinline)) int hooked(int i) {
    want_parent[i] = __builtin_return_address(0);
    return helper(i) * 2;
}

static void on_hit(const struct bootprof_hit *h, void *c) {
    (void)c;
    if (h->function_addr == (uint64_t)(uintptr_t)hooked && nseen < N) {
        seen_fn[nseen] = h->function_addr;
        seen_parent[nseen] = h->parent;
        nseen++;
        nested += helper(0) - 1; /* a hooked call inside the handler: must not dispatch */
    }
}

static int text_is_rx(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    uintptr_t a = (uintptr_t)hooked;
    int ok = 0;
    while (fgets(line, sizeof line, f)) {
        uintptr_t lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && a >= lo && a < hi) ok = strcmp(perms, "r-xp") == 0;
    }
    fclose(f);
    return ok;
}

int main(int argc, char **argv) {
    int mode = argc > 1 && argv[1][0] == 'c' ? BOOTPROF_MODE_CALL : BOOTPROF_MODE_TRAP;
    CHECK(bootprof_add_handler("*", on_hit, NULL) >= 0, "%s", bootprof_last_error());
    CHECK(bootprof_enable_mode("hooked", mode) == 1, "enable hooked: %s", bootprof_last_error());
    CHECK(bootprof_enable_mode("helper", mode) == 1, "enable helper: %s", bootprof_last_error());
    CHECK(text_is_rx(), "code pages not r-x after enabling");
    long sum = 0;
    for (int i = 0; i < N; i++) sum += hooked(i);
    CHECK(sum == 2 * (N * (N - 1) / 2 + N), "results");
    CHECK(nseen == N, "%d hits of hooked", nseen);
    for (int i = 0; i < N; i++) {
        CHECK(seen_fn[i] == (uint64_t)(uintptr_t)hooked, "function address");
        CHECK(seen_parent[i] == (uint64_t)(uintptr_t)want_parent[i], "hit %d parent %#lx, function saw %p", i,
              (unsigned long)seen_parent[i], want_parent[i]);
    }
    CHECK(nested == 0, "handler was re-entered");
    CHECK(bootprof_hits("helper") == N, "helper hits %ld (calls from the handler must not count)", (long)bootprof_hits("helper"));
    CHECK(bootprof_disable("*") == 2, "disable");
    CHECK(text_is_rx(), "code pages not r-x after disabling");
    printf("hooks: function, parent, no re-entry, protection: ok\n");
    return 0;
}
