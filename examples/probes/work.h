struct config {
    int count;
    long values[16];
};
struct config parse_config(const char *text);
unsigned long step(const struct config *cfg, int i);
