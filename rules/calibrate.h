/*
 * rules/calibrate: what this machine can do, measured.
 *
 * The roofline needs two ceilings per machine: the dense-compute peak
 * (FLOP/s, per dtype) and the memory bandwidth (bytes/s). The feature
 * extractor divides a kernel's achieved FLOP/s and bytes/s by them
 * (alu_util, memory_bandwidth_util), and the ridge point peak / bandwidth
 * (FLOP/byte) separates compute-bound from memory-bound kernels.
 *
 * Spec sheets do not say what *our* runtime reaches, so the peaks are
 * measured with the same library the runtime uses: oneDNN matmul
 * primitives (M = N = K = 512 and 1024, alternating; f32, and bf16 sources
 * and weights with f32 output when the CPU has native bf16 dot products),
 * best of several repetitions, on all online cores and on one thread. Bandwidth is a
 * STREAM-like OpenMP triad a[i] = b[i] + s * c[i] on fp32 arrays well
 * beyond the last-level cache, counting 12 bytes per element (read b, read
 * c, write a; the write-allocate read of a is not counted, as in STREAM).
 * docs/calibration.md gives the details.
 *
 * A full calibration takes a few seconds, so its result is cached as a
 * small JSON file, one per machine kind:
 *   <cache dir>/calibration-<key>.json
 * where the cache dir is $XDG_CACHE_HOME/cannprof (or $HOME/.cache/cannprof)
 * and <key> hashes the CPU model, the ISA flags that matter, the number of
 * online cores, the tool version and the oneDNN version. A cache file that
 * does not parse, has another schema version or describes another machine
 * is measured again and replaced, never an error.
 */
#ifndef CP_RULES_CALIBRATE_H
#define CP_RULES_CALIBRATE_H

#include "core/core.h"
#include "core/json.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Version of the cache file's layout; a file with another one is remeasured. */
#define CP_CALIBRATE_SCHEMA_VERSION 1
/* Time spent on each of the five figures when none is given (ms). */
#define CP_CALIBRATE_DEFAULT_BUDGET_MS 600
/* Largest matmul size tried for the peaks (M = N = K); 512 is the other. */
#define CP_CALIBRATE_MATMUL_SIZE 1024
/* Bytes the triad counts per element: 3 fp32 arrays x 4 bytes. */
#define CP_CALIBRATE_TRIAD_BYTES_PER_ELEM 12

struct cp_machine {
    /* ---- what the machine is (cp_machine_detect) ---- */
    char cpu_model[128]; /* /proc/cpuinfo "model name" (or ARM equivalent), "unknown" */
    char isa[256];       /* the ISA flags that matter, space separated, in a fixed order:
                          * "avx2 fma avx512f ... avx512_bf16 amx_bf16", or ARM's */
    char onednn[32];     /* oneDNN version the peaks were measured with, "2.6.3" */
    int cores;           /* online cores */
    bool has_bf16;       /* native bf16 dot products (x86 flags avx512_bf16 or amx_bf16) */

    /* ---- what it can do (cp_calibrate_measure) ---- */
    int threads_used;           /* threads of the all-core figures (= cores) */
    double peak_flops_f32;      /* FLOP/s, all cores (matmul counts 2*M*N*K) */
    double peak_flops_f32_1t;   /* FLOP/s, one thread */
    double peak_flops_bf16;     /* FLOP/s, all cores; 0 when !has_bf16 */
    double peak_flops_bf16_1t;  /* FLOP/s, one thread; 0 when !has_bf16 */
    double mem_bw;              /* bytes/s, triad on all cores, 12 bytes per element */
    char impl_f32[64];          /* oneDNN implementation that ran, "brg:avx512_core" */
    char impl_bf16[64];         /* "" when !has_bf16 */
    int64_t matmul_size;        /* M = N = K that reached the all-core fp32 peak */
    uint64_t triad_array_bytes; /* bytes of each of the 3 triad arrays */
    long budget_ms;             /* time spent per figure */
    double load_avg;            /* 1-minute load average when measuring began (other work
                                 * lowers every figure); -1 when unknown */
    char measured_at[32];       /* UTC, "2025-01-31T12:00:00Z" */

    /* ---- where it came from (cp_calibrate) ---- */
    char cache_key[64];    /* 16 hex digits */
    char source[16];       /* "measured" | "cache" */
    char cache_path[1024]; /* the cache file read or written; "" from cp_calibrate_measure */
    char cache_note[256];  /* why an existing cache file was not used; "" when none */
};

struct cp_calibrate_options {
    const char *cache_dir; /* NULL: $XDG_CACHE_HOME/cannprof, else $HOME/.cache/cannprof */
    bool force;            /* measure even when a valid cache file exists */
    long budget_ms;        /* <= 0: CP_CALIBRATE_DEFAULT_BUDGET_MS */
};

/* Fill the identity fields of `out` (cpu_model, isa, onednn, cores,
 * has_bf16, cache_key) from /proc/cpuinfo and sysconf, without measuring;
 * every other field is zeroed. Never fails: unknown values read "unknown". */
void cp_machine_detect(struct cp_machine *out);

/* Detect, then measure the five figures (fp32 and bf16 peaks on all cores
 * and on one thread, triad bandwidth), each for about `budget_ms` ms of
 * timed repetitions after one untimed warm-up (at least two timed
 * repetitions however small the budget; <= 0 means the default). No cache
 * is read or written; out->source is "measured". The OpenMP thread count of
 * the calling thread is restored afterwards. OUT: *out (zeroed on failure).
 * Errors: CP_ERR_NOMEM (triad arrays), CP_ERR_INTERNAL (oneDNN refused a
 * primitive), each with a message saying which figure failed. */
enum cp_status cp_calibrate_measure(long budget_ms, struct cp_machine *out, struct cp_diag *d);

/* The cache folder for `cache_dir` (NULL: $XDG_CACHE_HOME/cannprof when
 * XDG_CACHE_HOME is an absolute path, else $HOME/.cache/cannprof). Does not
 * create it. OUT: out[n]. CP_ERR_IO when neither variable gives a usable
 * folder or the path does not fit in n. */
enum cp_status cp_calibrate_cache_dir(const char *cache_dir, char *out, size_t n,
                                      struct cp_diag *d);

/* mkdir -p `dir` with mode 0700 (the XDG spec's mode for base folders), for
 * this cache and the other small per-machine files kept beside it (bench's
 * interference-probe floor). CP_ERR_WRITE naming the part that failed. */
enum cp_status cp_calibrate_cache_mkdir(const char *dir, struct cp_diag *d);

/* Load this machine's figures from the cache, or measure and store them.
 * The cache folder (and its parents) is created when missing (mode 0700);
 * a valid cache file is used even in a read-only folder. A cache file that
 * is corrupt, of another schema version or of another machine is measured
 * again and replaced (out->cache_note says why). OUT: *out (zeroed on
 * failure). Errors: CP_ERR_WRITE when the folder cannot be created or
 * written (checked before measuring; the message names the folder and the
 * reason), CP_ERR_IO when its path is too long, else those of
 * cp_calibrate_measure. */
enum cp_status cp_calibrate_run(const struct cp_calibrate_options *o, struct cp_machine *out,
                                struct cp_diag *d);

/* cp_calibrate_run with the default budget. */
enum cp_status cp_calibrate(const char *cache_dir, bool force, struct cp_machine *out,
                            struct cp_diag *d);

/* The compute ceiling for a kernel that ran on `threads` threads: the
 * all-core peak when threads <= 0 or >= threads_used, else the one-thread
 * peak times threads (capped at the all-core peak). `bf16` picks the bf16
 * peak, falling back to fp32 when the machine has no native bf16 (the
 * runtime then computes in fp32). FLOP/s; 0 when not measured. */
double cp_machine_peak_flops(const struct cp_machine *m, bool bf16, int threads);

/* Ridge point of the all-core roofline: peak FLOP/s / bandwidth
 * (FLOP/byte) for fp32 or bf16 (same fallback as above); 0 when not
 * measured. Kernels whose arithmetic intensity is below it are
 * memory-bound. */
double cp_machine_ridge(const struct cp_machine *m, bool bf16);

/* The figures as one JSON object (core/json.h): the same keys as the
 * cache file, plus "source", "cache_path", "cache_note" and
 * "ridge_flop_per_byte"; a figure that is not finite is null. A new
 * reference the caller releases with json_decref; NULL when out of
 * memory. */
json_t *cp_machine_to_json(const struct cp_machine *m);

#endif
