/* `cannprof import kernel_details.csv`: any bytes as torch_npu's or
 * msprof's task table (import/csv_ascend.c), with fuzz_import.c's checks:
 * a refusal leaves no run, an import reads back and exports. */
#define FUZZ_IMPORT_FILE "kernel_details.csv"
#include "fuzz_import.c"
