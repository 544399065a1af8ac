/*
 * core: the small things every other module leans on.
 *
 * Status codes are the one error currency of cannprof: every function that can
 * fail returns an `enum cp_status`, and calls that judge user input also fill a
 * `struct cp_diag` with a message that names the file, node or flag at fault.
 * Around that sit growable string buffers, checked allocation, hashing (xxHash,
 * for content ids and checksums), whole-file reads, read-only mmaps, atomic
 * file writes (temporary file, fsync, rename) and a monotonic clock.
 *
 * Nothing here keeps global mutable state.
 */
#ifndef CP_CORE_H
#define CP_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CP_VERSION_STRING "0.1.0"

/* Stable status codes: values never change meaning. */
enum cp_status {
    CP_OK = 0,
    CP_ERR_NOMEM = 1,       /* allocation failed */
    CP_ERR_IO = 2,          /* a file could not be read or written */
    CP_ERR_PARSE = 3,       /* input is not well formed */
    CP_ERR_UNSUPPORTED = 4, /* well formed, but something we do not handle */
    CP_ERR_INVALID = 5,     /* well formed, but semantically wrong */
    CP_ERR_DB = 6,          /* a database operation failed */
    CP_ERR_CORRUPT = 7,     /* a file failed its integrity checks */
    CP_ERR_VERSION = 8,     /* a file from a newer (or unknown) format version */
    CP_ERR_INTERNAL = 9,    /* a bug or an environment failure */
    CP_ERR_USAGE = 10,      /* bad command-line usage */
    CP_ERR_WRITE = 11,      /* an output (file, folder, database) could not be written */
};

/* Short name of a status ("invalid input", ...). Never NULL. */
const char *cp_status_str(enum cp_status st);

/* The CLI exit code for a status: 0 ok, 2 bad usage or input, 3 environment
 * or internal failure. (Exit code 1 is a verdict and never comes from here.) */
int cp_status_exit_code(enum cp_status st);

/* A diagnostic: the first error reported wins, later ones are dropped, so the
 * message names the root cause rather than its consequences. */
struct cp_diag {
    enum cp_status status;
    char msg[1024];
};

void cp_diag_init(struct cp_diag *d);

/* Record an error (printf-style message) and return `st`, so callers can write
 * `return cp_diag_set(d, CP_ERR_PARSE, "%s: ...", path);`. `d` may be NULL. */
enum cp_status cp_diag_set(struct cp_diag *d, enum cp_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

bool cp_diag_has_error(const struct cp_diag *d);

/* ---- checked allocation ---------------------------------------------- */

/* n * size with overflow detection: true on overflow (then *out is left as
 * it was), else false with the product in *out (out may be NULL). */
bool cp_mul_overflows(size_t a, size_t b, size_t *out);

/* The same for signed 64-bit sizes read from untrusted input (dimensions,
 * attributes): true on overflow, *out untouched; else false and *out set
 * (out may be NULL). */
bool cp_add_overflows_i64(int64_t a, int64_t b, int64_t *out);
bool cp_sub_overflows_i64(int64_t a, int64_t b, int64_t *out);
bool cp_mul_overflows_i64(int64_t a, int64_t b, int64_t *out);

/* calloc that also checks n*size for overflow. Caller frees. NULL on failure. */
void *cp_calloc(size_t n, size_t size);

/* realloc of an array of n elements; NULL on overflow or failure (old block
 * untouched, still owned by the caller). */
void *cp_realloc_array(void *p, size_t n, size_t size);

/* strdup that returns NULL on failure. Caller frees. */
char *cp_strdup(const char *s);

/* ---- string buffer ---------------------------------------------------- */

/* A growable, always NUL-terminated byte buffer. Once an allocation fails the
 * buffer is marked failed, later appends do nothing and cp_buf_status() says
 * CP_ERR_NOMEM, so callers can check once at the end. */
struct cp_buf {
    char *data;
    size_t len;
    size_t cap;
    bool failed;
};

void cp_buf_init(struct cp_buf *b);
void cp_buf_release(struct cp_buf *b);
void cp_buf_reset(struct cp_buf *b);
void cp_buf_append(struct cp_buf *b, const void *p, size_t n);
void cp_buf_puts(struct cp_buf *b, const char *s);
void cp_buf_putc(struct cp_buf *b, char c);
void cp_buf_printf(struct cp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cp_buf_vprintf(struct cp_buf *b, const char *fmt, va_list ap);
/* Append s (NULL: nothing) as XML or HTML text: < > & " ' as entities,
 * control characters but newline and tab dropped (XML 1.0 cannot hold
 * them), invalid UTF-8 repaired to U+FFFD. */
void cp_buf_markup(struct cp_buf *b, const char *s);
enum cp_status cp_buf_status(const struct cp_buf *b);
/* Hand over the data (caller frees); the buffer is left empty. */
char *cp_buf_steal(struct cp_buf *b);

/* ---- hashing ---------------------------------------------------------- */

/* 64-bit xxHash (XXH3) of a byte range. */
uint64_t cp_hash64(const void *p, size_t n);

/* Streaming 128-bit content hash (XXH3-128), printed as 32 hex digits. */
struct cp_hasher;
struct cp_hasher *cp_hasher_create(void);
void cp_hasher_update(struct cp_hasher *h, const void *p, size_t n);
/* Writes 32 hex digits and a NUL into out[33]. */
void cp_hasher_hex(struct cp_hasher *h, char out[33]);
void cp_hasher_free(struct cp_hasher *h);

/* 128-bit content hash of a whole buffer as 32 hex digits. */
void cp_hash128_hex(const void *p, size_t n, char out[33]);

/* ---- files ------------------------------------------------------------ */

/* Read a whole file. OUT: *data (caller frees, NUL-terminated for
 * convenience), *len. On failure the outputs stay NULL/0 and `d` names the
 * path and the reason. */
enum cp_status cp_file_read(const char *path, uint8_t **data, size_t *len, struct cp_diag *d);

/* Write `len` bytes to `path` atomically: a temporary file in the same folder,
 * fsync, then rename over `path`. On failure the target is untouched and the
 * temporary file is removed; the status is CP_ERR_WRITE (an environment
 * failure: exit 3), or CP_ERR_NOMEM. */
enum cp_status cp_file_write_atomic(const char *path, const void *data, size_t len,
                                    struct cp_diag *d);

/* A rendered buffer written with cp_file_write_atomic; a buffer that failed
 * while it was filled (cp_buf_status) is CP_ERR_NOMEM naming the path, and
 * nothing is written. */
enum cp_status cp_buf_write_file(const struct cp_buf *b, const char *path, struct cp_diag *d);

/* A read-only mapping of a whole file. */
struct cp_mmap {
    const uint8_t *data;
    size_t len;
};

/* Map `path` read-only. OUT: *m. Empty files map to {NULL, 0}. */
enum cp_status cp_mmap_open(const char *path, struct cp_mmap *m, struct cp_diag *d);
void cp_mmap_close(struct cp_mmap *m);

bool cp_path_exists(const char *path);
/* mkdir -p: create `path` and every missing parent with `mode` (existing
 * folders are left as they are). CP_ERR_WRITE naming the part that could
 * not be created, or the path when it exists and is not a folder. */
enum cp_status cp_mkdir_p(const char *path, unsigned mode, struct cp_diag *d);
/* cannprof's per-user cache folder: $XDG_CACHE_HOME/cannprof when
 * XDG_CACHE_HOME is an absolute path (the XDG spec ignores a relative one),
 * else $HOME/.cache/cannprof. Not created. OUT: out[n]. CP_ERR_IO when
 * neither variable gives a folder or the path does not fit. */
enum cp_status cp_cache_dir(char *out, size_t n, struct cp_diag *d);
/* The folder part of a path ("." when there is none). Caller frees. */
char *cp_path_dirname(const char *path);
/* Whether a path ends with `suffix`, ignoring ASCII case. */
bool cp_path_has_suffix(const char *path, const char *suffix);

/* ---- clocks ----------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t cp_clock_ns(void);

/* What the kernel counts for the calling thread: time on a CPU
 * (CLOCK_THREAD_CPUTIME_ID) and time runnable but waiting for one
 * (/proc/thread-self/schedstat; 0 where the kernel does not keep it). Read
 * one at the start of an interval and one at its end: the differences split
 * the interval's wall time into on-CPU, waiting for a CPU, and the rest
 * (off-CPU: I/O, sleeps, locks). */
struct cp_thread_clock {
    int64_t cpu_ns, runq_ns;
};

/* The CPU clock is read last here and first in _end, so that reading the
 * other is not counted as the interval's work. */
void cp_thread_clock_begin(struct cp_thread_clock *c);
void cp_thread_clock_end(struct cp_thread_clock *c);

/* ---- logging ---------------------------------------------------------- */

enum cp_log_level {
    CP_LOG_DEBUG = 0,
    CP_LOG_INFO = 1,
    CP_LOG_WARNING = 2,
    CP_LOG_ERROR = 3,
    CP_LOG_NULL = 4, /* nothing: ATC's default */
};

/* A logger is an explicit value passed down, not a global. */
struct cp_log {
    enum cp_log_level level;
    void *stream; /* FILE *, stderr when NULL */
};

void cp_log_msg(const struct cp_log *log, enum cp_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- small text helpers ----------------------------------------------- */

/* Levenshtein distance between two short strings (capped at 255 chars). */
size_t cp_edit_distance(const char *a, const char *b);

/* Parse a whole string as a base-10 int64; false on junk or overflow. */
bool cp_parse_i64(const char *s, int64_t *out);

/* Parse a byte count: digits with an optional binary suffix K, M, G or T
 * (also KiB, MiB, GiB, TiB; case-insensitive), "16G" = 16 * 2^30. False on
 * junk, a negative number or overflow. */
bool cp_parse_bytes(const char *s, uint64_t *out);

/* Format a byte count as "1.5 MiB". Writes into out[32]. */
void cp_format_bytes(uint64_t n, char out[32]);
/* Format a count with SI suffix as "1.23 G". Writes into out[32]. */
void cp_format_si(double v, char out[32]);

#endif
