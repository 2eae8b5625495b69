/* Archive member without probes, pulled in by main: used as it is. */
long max_of(const long *v, int n) {
    long m = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > m)
            m = v[i];
    return m;
}

int count_digits(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s >= '0' && *s <= '9';
    return n;
}
