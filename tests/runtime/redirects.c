/* What a shell does with descriptors by number, under a recording session: the runtime's own
 * descriptors (the session directory, the lane it grows) must not be among the low numbers a
 * program redirects into. Checks that descriptors 3 to 9 are free at main, then puts a file of
 * its own on descriptor 4 (as `4>file` would), writes 4 bytes into it, records N events (the
 * lane grows, with --keep all, many times over) and checks the file still holds those 4 bytes.
 * Prints "3-9 free; file: 4 bytes, keep". */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <fcntl.h>
#include <unistd.h>
#include "bootprof.h"

__attribute__((noinline)) static void tick(long i) { BOOTPROF_PROBE(redirects, tick, i); __asm__ volatile(""); }

int main(int argc, char **argv) {
    CHECK(argc == 3, "usage: redirects FILE N");
    for (int fd = 3; fd <= 9; fd++) CHECK(fcntl(fd, F_GETFD) == -1, "descriptor %d is open at main", fd);
    int f = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(f >= 0 && dup2(f, 4) == 4 && close(f) == 0, "cannot put %s on descriptor 4", argv[1]);
    CHECK(write(4, "keep", 4) == 4, "write");
    long n = atol(argv[2]);
    for (long i = 0; i < n; i++) tick(i);
    char buf[16] = {0};
    off_t size = lseek(4, 0, SEEK_END);
    CHECK(pread(4, buf, sizeof buf - 1, 0) >= 0, "pread");
    printf("3-9 free; file: %ld bytes, %s\n", (long)size, buf);
    return 0;
}
