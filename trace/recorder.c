/* The in-memory trace recorder: an event array that grows only when asked
 * (or, failing that, when full), interned names, and the application range
 * stack. The hot path (cp_trace_record with reserved room) is a bounds check
 * and a store. */
#include "trace/trace_internal.h"

#include <stdlib.h>
#include <string.h>

struct cp_trace_range {
    uint64_t start_ns;
    int32_t name;
    int32_t iteration;
};

struct cp_trace_recorder {
    struct cp_trace_event *events;
    size_t n, cap;
    size_t dropped;
    int32_t iteration;
    int depth; /* open ranges */
    struct cp_strtab strings;
    struct cp_trace_range stack[CP_TRACE_MAX_DEPTH];
};

const char *cp_trace_layer_name(enum cp_trace_layer l)
{
    switch (l) {
    case CP_LAYER_APP:
        return "application";
    case CP_LAYER_RUNTIME:
        return "runtime";
    case CP_LAYER_DEVICE:
        return "device";
    }
    return "unknown";
}

struct cp_trace_recorder *cp_trace_recorder_create(size_t capacity)
{
    struct cp_trace_recorder *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->iteration = -1;
    cp_strtab_init(&r->strings);
    if (capacity && cp_trace_reserve(r, capacity) != CP_OK) {
        free(r);
        return NULL;
    }
    return r;
}

void cp_trace_recorder_free(struct cp_trace_recorder *r)
{
    if (!r)
        return;
    free(r->events);
    cp_strtab_release(&r->strings);
    free(r);
}

static bool grow_to(struct cp_trace_recorder *r, size_t need)
{
    if (need <= r->cap)
        return true;
    size_t cap = r->cap ? r->cap : 1024;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    struct cp_trace_event *ev = cp_realloc_array(r->events, cap, sizeof(*ev));
    if (!ev)
        return false;
    r->events = ev;
    r->cap = cap;
    return true;
}

enum cp_status cp_trace_reserve(struct cp_trace_recorder *r, size_t n)
{
    if (n > SIZE_MAX - r->n)
        return CP_ERR_NOMEM;
    return grow_to(r, r->n + n) ? CP_OK : CP_ERR_NOMEM;
}

int32_t cp_trace_intern(struct cp_trace_recorder *r, const char *s)
{
    if (!s)
        return -1;
    return cp_strtab_intern(&r->strings, s, strlen(s));
}

void cp_trace_record_depth(struct cp_trace_recorder *r, enum cp_trace_layer layer, int32_t name,
                           int32_t kernel, int32_t iteration, uint64_t start_ns, uint64_t end_ns,
                           int thread, int depth)
{
    if ((unsigned)layer >= CP_TRACE_N_LAYERS) {
        r->dropped++;
        return;
    }
    if (__builtin_expect(r->n == r->cap, 0) && !grow_to(r, r->n + 1)) {
        r->dropped++;
        return;
    }
    struct cp_trace_event *e = &r->events[r->n++];
    e->start_ns = start_ns;
    e->end_ns = end_ns < start_ns ? start_ns : end_ns;
    e->name = name;
    e->kernel = kernel < 0 ? -1 : kernel;
    e->iteration = iteration == CP_TRACE_ITER_CURRENT ? r->iteration
                   : iteration < 0                    ? -1
                                                      : iteration;
    e->thread = (int16_t)(thread < 0 ? 0 : thread > INT16_MAX ? INT16_MAX : thread);
    e->layer = (uint8_t)layer;
    e->depth = (uint8_t)(depth < 0 ? 0 : depth > UINT8_MAX ? UINT8_MAX : depth);
}

void cp_trace_record(struct cp_trace_recorder *r, enum cp_trace_layer layer, int32_t name,
                     int32_t kernel, int32_t iteration, uint64_t start_ns, uint64_t end_ns,
                     int thread)
{
    cp_trace_record_depth(r, layer, name, kernel, iteration, start_ns, end_ns, thread, 0);
}

enum cp_status cp_trace_push(struct cp_trace_recorder *r, const char *name)
{
    if (!name || r->depth >= CP_TRACE_MAX_DEPTH)
        return CP_ERR_INVALID;
    int32_t id = cp_trace_intern(r, name);
    if (id < 0)
        return CP_ERR_NOMEM;
    struct cp_trace_range *rg = &r->stack[r->depth++];
    rg->name = id;
    rg->iteration = r->iteration;
    rg->start_ns = cp_clock_ns(); /* last, so interning is not timed */
    return CP_OK;
}

enum cp_status cp_trace_pop(struct cp_trace_recorder *r)
{
    uint64_t end = cp_clock_ns();
    if (r->depth <= 0)
        return CP_ERR_INVALID;
    const struct cp_trace_range *rg = &r->stack[--r->depth];
    cp_trace_record_depth(r, CP_LAYER_APP, rg->name, -1, rg->iteration, rg->start_ns, end, 0,
                          r->depth);
    return CP_OK;
}

int cp_trace_depth(const struct cp_trace_recorder *r)
{
    return r->depth;
}

void cp_trace_set_iteration(struct cp_trace_recorder *r, int32_t iteration)
{
    r->iteration = iteration < 0 ? -1 : iteration;
}

int32_t cp_trace_iteration(const struct cp_trace_recorder *r)
{
    return r->iteration;
}

size_t cp_trace_n_events(const struct cp_trace_recorder *r)
{
    return r->n;
}

const struct cp_trace_event *cp_trace_events(const struct cp_trace_recorder *r)
{
    return r->events;
}

const char *cp_trace_string(const struct cp_trace_recorder *r, int32_t id)
{
    return cp_strtab_get(&r->strings, id);
}

size_t cp_trace_n_strings(const struct cp_trace_recorder *r)
{
    return r->strings.n;
}

size_t cp_trace_dropped(const struct cp_trace_recorder *r)
{
    return r->dropped;
}

void cp_trace_clear(struct cp_trace_recorder *r)
{
    r->n = 0;
    r->dropped = 0;
}
