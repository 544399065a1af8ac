/* Private to om/: what config.c and config_lists.c share. */
#ifndef CP_OM_CONFIG_INTERNAL_H
#define CP_OM_CONFIG_INTERNAL_H

#include <stdbool.h>

/* A whole string as a finite double. */
bool cp_cfg_parse_f64(const char *s, double *out);

#endif
