/* A plain shared library (no bootprof) that a host links at start-up and that depends on a probed
 * library: the probed library is then loaded, and its constructor run, before the host's
 * constructors, without the host naming it on its link line. */
int shared_mid(void) { return 0; }
