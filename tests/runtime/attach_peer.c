/* A client of a program's attach socket that is not the program's user: `attach_peer SOCKET
 * UID`, run as root, opens the socket's name (O_PATH), becomes UID, connects through
 * /proc/self/fd/N (so no directory on the way need let UID in: only the credentials the socket
 * sees differ), says hello and prints the answer's first line. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int path = open(argv[1], O_PATH);
    if (path < 0) { perror(argv[1]); return 2; }
    uid_t uid = (uid_t)atoi(argv[2]);
    if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) { perror("setuid"); return 2; }
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "/proc/self/fd/%d", path);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 2; }
    /* A refusal may come (and the connection close) before the request is written: the write
     * may fail, the answer is there to read all the same. */
    signal(SIGPIPE, SIG_IGN);
    const char *hello = "hello 1\nlist\n";
    (void)!write(s, hello, strlen(hello));
    char buf[512];
    ssize_t n = read(s, buf, sizeof buf - 1);
    if (n < 0) return 2;
    buf[n] = 0;
    char *nl = strchr(buf, '\n');
    if (nl) nl[1] = 0;
    fputs(buf, stdout);
    return 0;
}
