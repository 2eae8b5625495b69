"""Real programs, end to end (tests/realworld/run): bzip2, lz4, sqlite3 and jsoncpp (C++, with
CMake) from Debian's source packages, built plain, with glibc's -pg and through bootprof-link,
judged by their own tests in every mode and timed. The modules, each using only those below it:

  main     the command line; takes the arguments, runs the steps, hands on the exit status
  report   the results tables (results.md) and the BENCHMARKS.md sections
  docs     the docs/ figures from the sqlite3 and jsoncpp builds
  bench    timed rounds, callgrind counts and link times of the builds
  checks   each program's own tests, in the modes disabled, trap and call
  builds   the variants, built through bootprof-link where they ask for it
  sources  the Debian source packages and the packages the builds need
  common   paths, variants and modes, command helpers, and the run's Session

workloads (beside this package, in tests/realworld) makes the fixed inputs."""
