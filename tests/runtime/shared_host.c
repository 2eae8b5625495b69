/* A host linked by plain cc, without the runtime, calling probed libraries that carry their own:
 * each argument LIB names one linked at start-up, LIB=PATH one it loads with dlopen RTLD_LOCAL
 * (and RTLD_LAZY: calls bound when first made).
 * It calls LIB_work 10 times for each, then prints what each library's runtime calls answer
 * (the sites and the hits of every `*:work` probe: with one runtime serving, every library sees
 * all of them) and which object the global scope resolves `bootprof_register` to (without a
 * runtime in the host, the copy that serves; the host's own exports none). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HOST_PROBE
#include "bootprof.h"
#endif

static void *sym(void *handle, const char *lib, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "%s_%s", lib, what);
    void *p = dlsym(handle, name);
    if (!p) {
        fprintf(stderr, "FAILED: no %s: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

/* The file name of the object defining `addr`. */
static const char *object_of(void *addr) {
    Dl_info info;
    if (!addr || !dladdr(addr, &info) || !info.dli_fname) return "(none)";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

int main(int argc, char **argv) {
    char libs[8][32];
    void *handles[8];
    int n = argc - 1 < 8 ? argc - 1 : 8;
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(argv[i + 1], '=');
        int len = eq ? (int)(eq - argv[i + 1]) : (int)strlen(argv[i + 1]);
        snprintf(libs[i], sizeof libs[i], "%.*s", len, argv[i + 1]);
        handles[i] = RTLD_DEFAULT;
        if (eq && !(handles[i] = dlopen(eq + 1, RTLD_LAZY | RTLD_LOCAL))) {
            fprintf(stderr, "FAILED: %s\n", dlerror());
            return 1;
        }
        int (*work)(int) = (int (*)(int))sym(handles[i], libs[i], "work");
        for (int k = 0; k < 10; k++)
            if (work(k) != k + 1) return 1;
    }
#ifdef HOST_PROBE
    for (int k = 0; k < 10; k++) BOOTPROF_PROBE(host, work, k);
#endif
    for (int i = 0; i < n; i++) {
        size_t (*sites)(void) = (size_t(*)(void))sym(handles[i], libs[i], "sites");
        long (*hits)(const char *) = (long (*)(const char *))sym(handles[i], libs[i], "hits");
        printf("%s: %zu sites, %ld hits\n", libs[i], sites(), hits("*:work"));
    }
#ifdef HOST_PROBE
    printf("host: %zu sites, %ld hits\n", bootprof_site_count(), bootprof_hits("*:work"));
#endif
    printf("global bootprof_register in %s\n", object_of(dlsym(RTLD_DEFAULT, "bootprof_register")));
    return 0;
}
