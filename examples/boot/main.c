/* A program that "boots" in phases, annotated for bootprof's recorder:
 *   constructors (early_init) -> config parsing -> a worker thread that holds the "disk" while it
 *   warms a cache, which main waits for -> a slow step (a DELAY) -> done.
 * Run it through `bootprof run -- ./boot` and look at the flame chart: each phase appears with
 * its duration, and main's wait for the disk is blamed on the worker. The durations are fixed
 * sleeps, so a test can check them from the numbers. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "bootprof.h"

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {}
}

__attribute__((constructor(200))) static void early_init(void) {
    BOOTPROF_ENTER();
    sleep_ms(20);
    BOOTPROF_EXIT();
}

__attribute__((noinline)) static int parse_config(const char *text) {
    BOOTPROF_ENTER();
    int n = 0;
    for (const char *p = text; *p; p++) n += *p == '=';
    sleep_ms(30);
    BOOTPROF_EXIT();
    return n;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int disk_ready;

__attribute__((noinline)) static void warm_cache(void) {
    BOOTPROF_ENTER();
    sleep_ms(60);
    BOOTPROF_EXIT();
}

static void *disk_worker(void *arg) {
    (void)arg;
    BOOTPROF_THREAD(diskworker);
    BOOTPROF_HOLD(disk);
    warm_cache();
    pthread_mutex_lock(&lock);
    disk_ready = 1;
    BOOTPROF_RELEASE(disk);
    pthread_cond_signal(&ready_cond);
    pthread_mutex_unlock(&lock);
    return NULL;
}

__attribute__((noinline)) static void mount_disk(void) {
    BOOTPROF_ENTER();
    pthread_t t;
    pthread_create(&t, NULL, disk_worker, NULL);
    BOOTPROF_WAIT(disk);
    pthread_mutex_lock(&lock);
    while (!disk_ready) pthread_cond_wait(&ready_cond, &lock);
    pthread_mutex_unlock(&lock);
    BOOTPROF_UNWAIT(disk);
    pthread_join(t, NULL);
    BOOTPROF_EXIT();
}

__attribute__((noinline)) static void delay(void) {
    BOOTPROF_ENTER();
    sleep_ms(40);
    BOOTPROF_EXIT();
}

int main(int argc, char **argv) {
    BOOTPROF_THREAD(main);
    BOOTPROF_ENTER();
    int n = parse_config(argc > 1 ? argv[1] : "a=1,b=2,c=3");
    mount_disk();
    delay();
    BOOTPROF_EVENT(booted);
    BOOTPROF_EXIT();
    printf("booted with %d settings\n", n);
    return 0;
}
