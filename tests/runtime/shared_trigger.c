/* A library without probes or runtime whose constructor loads the library SHARED_TRIGGER names
 * with dlopen RTLD_LOCAL. As a dependency of a probed library loaded RTLD_LOCAL, it runs after
 * that library bound its calls (to its own runtime: no other was in the global scope yet) and
 * before that library's constructor registers: the library loaded here takes the global scope
 * first, and the other's registration must go to it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void load(void) {
    const char *path = getenv("SHARED_TRIGGER");
    if (path && !dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
        fprintf(stderr, "FAILED: %s\n", dlerror());
        exit(1);
    }
}
