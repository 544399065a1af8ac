/* What `cannprof trace --target` reads from a server (GET /v1/trace): the
 * bytes as JSON, then as request events; events that read are stored as a
 * pipeline run (or refused as an empty capture), and print back as JSON
 * that reads again to the same events. */
#include "harness.h"

#include "serve/serve.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t e;
    json_t *j = json_loadb((const char *)data, size, 0, &e);
    if (!j)
        return 0;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_serve_event *ev = NULL;
    size_t n = 0;
    enum cp_status st = cp_serve_events_from_json("fuzz", j, &ev, &n, &d);
    fuzz_expect_refusal("cp_serve_events_from_json", st, &d);
    if (st != CP_OK && (ev || n))
        fuzz_fail("a refused trace left %zu events", n);
    if (st == CP_OK) {
        /* printed back (origin 0) it reads to the same events */
        json_t *back = cp_serve_events_json(ev, n, 0);
        struct cp_serve_event *ev2 = NULL;
        size_t n2 = 0;
        cp_diag_init(&d);
        if (back && cp_serve_events_from_json("back", back, &ev2, &n2, &d) != CP_OK)
            fuzz_fail("events printed back do not read: %s", d.msg);
        if (back && (n2 != n || (n && memcmp(ev, ev2, n * sizeof *ev) != 0)))
            fuzz_fail("events printed back read differently (%zu, %zu)", n, n2);
        json_decref(back);
        free(ev2);
        /* stored: a run, or an empty capture refused */
        if (n <= 4096) {
            char path[1100];
            if (!fuzz_tmp_path("events.db", path, sizeof path))
                fuzz_fail("no temporary folder");
            unlink(path);
            struct cp_serve_trace_info info = {.model_path = "fuzz.om", .max_batch = 1};
            int64_t run = -1;
            cp_diag_init(&d);
            st = cp_serve_store_events(path, &info, ev, n, &run, &d);
            fuzz_expect_refusal("cp_serve_store_events", st, &d);
            if (st == CP_OK && run < 0)
                fuzz_fail("stored events have no run");
        }
    }
    free(ev);
    json_decref(j);
    return 0;
}
