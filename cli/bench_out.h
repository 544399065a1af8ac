/* cli/bench_out: cannprof bench's results as text and as JSON. Private to
 * cli/: cmd_bench.c parses and calls these to print. */
#ifndef CP_CLI_BENCH_OUT_H
#define CP_CLI_BENCH_OUT_H

#include "core/json.h"
#include "runner/bench.h"

/* The text output of one model, of an A/B comparison, of separate runs. */
void cp_bench_print_one(const struct cp_bench_request *q, const struct cp_bench_result *r);
void cp_bench_print_ab(const struct cp_bench_request *q, const struct cp_bench_result *r);
void cp_bench_print_runs(const struct cp_bench_request *q, const struct cp_bench_runs *rs);

/* The same as JSON; NULL when out of memory. */
json_t *cp_bench_json_one(const struct cp_bench_request *q, const struct cp_bench_result *r);
json_t *cp_bench_json_ab(const struct cp_bench_request *q, const struct cp_bench_result *r);
json_t *cp_bench_json_runs(const struct cp_bench_request *q, const struct cp_bench_runs *rs);

#endif
