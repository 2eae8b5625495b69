static int items[128];
static int head, tail;

void queue_push(int v) { items[tail++ % 128] = v; }

int queue_pop(int *out) {
    if (head == tail)
        return 0;
    *out = items[head++ % 128];
    return 1;
}
