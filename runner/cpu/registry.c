/* Kernel selection: the fast kernels in preference order, then the
 * reference kernel of the op. The tables are constant and short, so a
 * linear walk at plan time is all it takes (nothing is cached: no mutable
 * globals). */
#include "runner/cpu/kernel.h"

#include <stdio.h>
#include <string.h>

const struct cp_kernel *cp_kernel_reference(enum cp_op op)
{
    if (op == CP_OP_UNKNOWN)
        return NULL;
    for (size_t i = 0; cp_ref_kernels[i]; i++)
        if (cp_ref_kernels[i]->op == op)
            return cp_ref_kernels[i];
    return NULL;
}

bool cp_kernel_runs_on(const struct cp_kernel *k, const struct cp_graph *g, const struct cp_node *n,
                       const struct cp_host *host, char *missing, size_t cap)
{
    if (missing && cap)
        missing[0] = '\0';
    const char *need = k->isa ? k->isa(g, n) : NULL;
    bool ok = true;
    size_t used = 0;
    for (const char *p = need ? need : ""; *p;) {
        size_t len = strcspn(p, " ");
        char flag[64];
        if (len > 0 && len < sizeof flag) {
            memcpy(flag, p, len);
            flag[len] = '\0';
            if (!host || !cp_host_has_flag(host, flag)) {
                ok = false;
                if (missing && cap) {
                    int w = snprintf(missing + used, cap - used, "%s%s", used ? " " : "", flag);
                    if (w > 0)
                        used = used + (size_t)w < cap ? used + (size_t)w : cap - 1;
                }
            }
        }
        p += len;
        p += strspn(p, " ");
    }
    return ok;
}

size_t cp_kernel_choices(const struct cp_graph *g, const struct cp_node *n,
                         const struct cp_host *host, const struct cp_kernel **out, size_t cap)
{
    size_t k = 0;
    if (n->op == CP_OP_UNKNOWN)
        return 0;
    for (size_t i = 0; cp_fast_kernels[i]; i++) {
        const struct cp_kernel *f = cp_fast_kernels[i];
        if (f->op == n->op && (!f->supports || f->supports(g, n)) &&
            cp_kernel_runs_on(f, g, n, host, NULL, 0)) {
            if (k < cap)
                out[k] = f;
            k++;
        }
    }
    const struct cp_kernel *r = cp_kernel_reference(n->op);
    if (r && (!r->supports || r->supports(g, n))) {
        if (k < cap)
            out[k] = r;
        k++;
    }
    return k;
}

/* The kernel --op_kernels pins node n to (its `kernel` attribute), or NULL
 * when that kernel does not exist for the op, does not take the node or
 * cannot run on this CPU (*why says which). */
static const struct cp_kernel *pinned(const struct cp_graph *g, const struct cp_node *n,
                                      const struct cp_host *host, const char *name,
                                      struct cp_kernel_passed *passed)
{
    const struct cp_kernel *k = NULL;
    for (size_t i = 0; cp_fast_kernels[i] && !k; i++)
        if (cp_fast_kernels[i]->op == n->op && strcmp(cp_fast_kernels[i]->name, name) == 0)
            k = cp_fast_kernels[i];
    const struct cp_kernel *r = cp_kernel_reference(n->op);
    if (!k && r && strcmp(r->name, name) == 0)
        k = r;
    const char *why = NULL;
    if (!k)
        why = "no such kernel for this op";
    else if (k->supports && !k->supports(g, n))
        why = "it does not take this node";
    else if (!cp_kernel_runs_on(k, g, n, host, NULL, 0))
        why = "this CPU lacks what it needs";
    if (!why)
        return k;
    if (passed) {
        passed->kernel = NULL;
        snprintf(passed->missing, sizeof passed->missing, "%s", why);
    }
    return NULL;
}

const struct cp_kernel *cp_kernel_select(const struct cp_graph *g, const struct cp_node *n,
                                         const struct cp_host *host, bool reference_only,
                                         struct cp_kernel_passed *passed)
{
    if (passed) {
        passed->kernel = NULL;
        passed->missing[0] = '\0';
    }
    if (n->op == CP_OP_UNKNOWN)
        return NULL;
    const char *pin = cp_node_attr_string(n, "kernel", "");
    if (pin[0] && !reference_only)
        return pinned(g, n, host, pin, passed);
    if (!reference_only)
        for (size_t i = 0; cp_fast_kernels[i]; i++) {
            const struct cp_kernel *k = cp_fast_kernels[i];
            if (k->op != n->op || (k->supports && !k->supports(g, n)))
                continue;
            if (!passed || passed->kernel) {
                if (cp_kernel_runs_on(k, g, n, host, NULL, 0))
                    return k;
            } else if (cp_kernel_runs_on(k, g, n, host, passed->missing, sizeof passed->missing)) {
                return k;
            } else {
                passed->kernel = k;
            }
        }
    return cp_kernel_reference(n->op);
}

bool cp_op_is_view(enum cp_op op)
{
    switch (op) {
    case CP_OP_RESHAPE:
    case CP_OP_FLATTEN:
    case CP_OP_SQUEEZE:
    case CP_OP_UNSQUEEZE:
    case CP_OP_IDENTITY:
    case CP_OP_DROPOUT:
        return true;
    default:
        return false;
    }
}
