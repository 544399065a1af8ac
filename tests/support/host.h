/* Test support: what a test needs to know about this CPU to choose its
 * expectation (core/host.h underneath).
 *
 * A test of bf16 arithmetic needs a CPU that has it; on one without, the
 * conversion refuses the bf16 precision modes (exit 2), and the test checks
 * that refusal before it skips, naming what the CPU lacks:
 *
 *     char cpu[256];
 *     if (!cp_t_host_has_bf16(cpu, sizeof cpu)) {
 *         ... convert with the mode, assert cp_t_is_bf16_refusal(msg, mode) ...
 *         cr_skip_test("this CPU (%s) has neither avx512_bf16 nor amx_bf16: ...", cpu);
 *     }
 *
 * Like the rest of tests/support, nothing here uses Criterion. */
#ifndef CP_TEST_HOST_H
#define CP_TEST_HOST_H

#include <stdbool.h>
#include <stddef.h>

/* Whether this CPU has the bf16 arithmetic the bf16 precision modes need
 * (avx512_bf16 or amx_bf16). OUT (when `cpu` is not NULL): its model name,
 * cut to `cap` bytes. */
bool cp_t_host_has_bf16(char *cpu, size_t cap);

/* Whether `msg` is the precision pass refusing --precision_mode=`mode` on a
 * CPU without bf16: it names the mode, the features it needs and the mode
 * to use instead (force_fp32). False, after printing what is missing to
 * stderr, otherwise. */
bool cp_t_is_bf16_refusal(const char *msg, const char *mode);

#endif
