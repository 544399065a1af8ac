/* Status codes and diagnostics. */
#include "core/core.h"

#include <stdio.h>
#include <string.h>

const char *cp_status_str(enum cp_status st)
{
    switch (st) {
    case CP_OK:
        return "ok";
    case CP_ERR_NOMEM:
        return "out of memory";
    case CP_ERR_IO:
        return "i/o error";
    case CP_ERR_PARSE:
        return "parse error";
    case CP_ERR_UNSUPPORTED:
        return "unsupported";
    case CP_ERR_INVALID:
        return "invalid input";
    case CP_ERR_DB:
        return "database error";
    case CP_ERR_CORRUPT:
        return "corrupt file";
    case CP_ERR_VERSION:
        return "unsupported format version";
    case CP_ERR_INTERNAL:
        return "internal error";
    case CP_ERR_USAGE:
        return "bad usage";
    case CP_ERR_WRITE:
        return "cannot write";
    }
    return "unknown status";
}

int cp_status_exit_code(enum cp_status st)
{
    switch (st) {
    case CP_OK:
        return 0;
    case CP_ERR_PARSE:
    case CP_ERR_UNSUPPORTED:
    case CP_ERR_INVALID:
    case CP_ERR_CORRUPT:
    case CP_ERR_VERSION:
    case CP_ERR_USAGE:
        return 2;
    case CP_ERR_IO:
        /* A file the user named that cannot be read is bad input. */
        return 2;
    case CP_ERR_NOMEM:
    case CP_ERR_DB:
    case CP_ERR_INTERNAL:
    case CP_ERR_WRITE: /* an output that cannot be written is the environment's */
        return 3;
    }
    return 3;
}

void cp_diag_init(struct cp_diag *d)
{
    if (!d)
        return;
    d->status = CP_OK;
    d->msg[0] = '\0';
}

enum cp_status cp_diag_set(struct cp_diag *d, enum cp_status st, const char *fmt, ...)
{
    if (!d || d->status != CP_OK)
        return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    d->status = st;
    return st;
}

bool cp_diag_has_error(const struct cp_diag *d)
{
    return d && d->status != CP_OK;
}
