"""Deterministic inputs for the real-program runs: a text corpus for bzip2 and lz4, SQL scripts
for the sqlite3 shell, and a JSON document for jsoncpp. Everything is generated from fixed seeds, so two runs (and two
machines) see the same bytes."""


def corpus(size: int) -> bytes:
    """`size` bytes of word-like text from a fixed linear congruential generator: compressible
    like prose (bzip2 gets about 3.5:1), not a repeated block that a compressor would shortcut."""
    syllables = [
        "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "an", "el", "is", "om", "ur", "pra",
        "sto", "bel", "dri", "gan", "fel", "qui", "zor", "the", "ing", "ion", "ver",
    ]
    out = bytearray()
    x = 12345
    line = 0
    while len(out) < size:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        n = 1 + (x >> 16) % 4
        word = "".join(syllables[(x >> (3 * k)) % len(syllables)] for k in range(n))
        out += word.encode()
        line += len(word) + 1
        if line > 72:
            out += b".\n" if x & 1 else b"\n"
            line = 0
        else:
            out += b" "
    return bytes(out[:size])


def sqlite_script(rows: int) -> str:
    """A fixed SQL script for the shell: bulk insert, indexes, joins, aggregates, window and JSON
    functions, FTS4, updates and deletes in transactions, an integrity check and a VACUUM. Its
    output depends only on `rows` (no random(), no time), so builds can be compared byte for byte.
    A small page cache makes the pager read pages back from the file."""
    return f"""\
.bail on
.headers on
PRAGMA page_size=4096;
PRAGMA cache_size=50;
PRAGMA journal_mode=DELETE;
CREATE TABLE t(id INTEGER PRIMARY KEY, a INT, b TEXT, c REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<{rows})
INSERT INTO t SELECT i, (i*7919)%1000, printf('row-%08d-%s', i, hex(i*31)), i*0.5 FROM n;
CREATE INDEX t_a ON t(a);
CREATE INDEX t_b ON t(b);
CREATE TABLE u(a INT PRIMARY KEY, name TEXT) WITHOUT ROWID;
INSERT INTO u SELECT DISTINCT a, 'name' || a FROM t;
SELECT count(*), sum(a), min(b), max(b), total(c) FROM t;
SELECT a, count(*), avg(c) FROM t GROUP BY a ORDER BY 2 DESC, 1 LIMIT 10;
SELECT u.name, count(*), sum(t.c) FROM t JOIN u USING(a) WHERE t.a BETWEEN 100 AND 120
 GROUP BY 1 ORDER BY 1;
BEGIN;
UPDATE t SET c = c * 2 WHERE a % 3 = 0;
COMMIT;
BEGIN;
DELETE FROM t WHERE id % 5 = 0;
COMMIT;
SELECT count(*), total(c) FROM t;
SELECT id, a, rank() OVER (PARTITION BY a ORDER BY id) AS r FROM t WHERE a < 3 ORDER BY id LIMIT 12;
SELECT json_group_array(json_object('id', id, 'b', b)) FROM (SELECT * FROM t ORDER BY id LIMIT 4);
SELECT substr(b, 1, 12), length(b) FROM t WHERE b LIKE 'row-0000%7-%' ORDER BY b LIMIT 5;
CREATE VIRTUAL TABLE f USING fts4(body);
INSERT INTO f SELECT b || ' ' || u.name FROM t JOIN u USING(a) WHERE id <= {max(rows // 10, 10)};
SELECT count(*) FROM f WHERE f MATCH 'name7*';
SELECT a, group_concat(id, ',') FROM (SELECT a, id FROM t WHERE a IN (1, 2, 3) ORDER BY id LIMIT 9)
 GROUP BY a ORDER BY a;
PRAGMA integrity_check;
VACUUM;
SELECT count(*), sum(a) FROM t WHERE b > 'row-0001';
"""


# The shell's start-up and first query, for the flame chart: open an existing database, read its
# schema, run one query.
SQLITE_FIRST_QUERY = "SELECT name, (SELECT count(*) FROM t) FROM sqlite_schema WHERE type='table' ORDER BY 1;\n"


def json_document(size: int) -> str:
    """About `size` bytes of JSON from a fixed linear congruential generator: an array of records
    with integers (some beyond 32 bits), reals, strings with escapes and non-ASCII text, booleans,
    nulls and nested arrays and objects, what jsoncpp's reader and writers handle in real
    documents."""
    words = ["alpha", "beta", "gamma", "delta", "caf\u00e9", "na\u00efve", "quote\\\"d",
             "tab\\t", "line\\n", "\\u00e9t\u00e9", "slash\\/", "x"]
    out = ["[\n"]
    n = 0
    x = 4242
    while n < size:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        tags = ", ".join(f'"{words[(x >> k) % len(words)]}"' for k in range(x % 4))
        ok = "true" if x & 1 else "false"
        pos = f'{{"x": {x % 97 - 48}, "y": {(x >> 7) % 89}.5}}'
        rec = (f'{{"id": {x}, "big": {x * 4099}, "ratio": {x / 65536:.6f}, '
               f'"name": "{words[x % len(words)]}-{x % 1000}", "ok": {ok}, "none": null, '
               f'"tags": [{tags}], "pos": {pos}}}')
        out.append(("  " if n == 0 else ", ") + rec + "\n")
        n += len(rec) + 3
    out.append("]\n")
    return "".join(out)
