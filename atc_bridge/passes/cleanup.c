/* The cleanup pass family (see pass.h). */
#include "atc_bridge/passes/pass.h"

#include <stddef.h>

const struct cp_pass cp_cleanup_passes[] = {
    {NULL, NULL, NULL, NULL},
};
