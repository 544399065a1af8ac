/* notify: the body of each webhook format, then delivery against a throwaway
 * HTTP/1.1 server on 127.0.0.1 that runs in a thread of the test. The server
 * answers each request with a scripted status (200, 500, 404, 429 ...) or
 * never answers at all, and records what it received, so the tests check the
 * payload a service would see, retries and their count, timeouts, refused
 * connections, bad URLs, and that no message ever shows a webhook's secret.
 * Nothing asserts on time except one generous sanity bound. */
#include "core/core.h"
#include "notify/notify.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/hook_server.h"

/* ---- fixtures ----------------------------------------------------------- */

static const struct cp_alert alert = {
    .title = "cannprof: regression in service sd-unet",
    .service = "sd-unet",
    .verdict = "regressed",
    .text = "latency_ms   12.10 -> 13.40   +10.7%  [+8.9%, +12.5%]  p=0.0001  regressed\n"
            "throughput   82.6 -> 74.6     -9.7%  regressed\n"
            "peak_memory  1.2 GiB -> 1.2 GiB  +0.0%  unchanged\n",
    .figures_json = "{\"latency_ms\":{\"before\":12.1,\"after\":13.4,\"delta_pct\":10.7}}",
    .trace_path = "/tmp/sd.db",
    .baseline_tag = "v1.2",
};

/* Options for a quick test: small timeouts and backoff. */
static void quick_opts(struct cp_notify_opts *o, const char *url, enum cp_webhook_format f)
{
    cp_notify_opts_init(o);
    o->url = url;
    o->format = f;
    o->connect_timeout_ms = 2000;
    o->timeout_ms = 5000;
    o->retries = 2;
    o->backoff_ms = 10;
}

static json_t *payload_json(enum cp_webhook_format f, const struct cp_alert *a)
{
    struct cp_buf b;
    struct cp_diag d;
    cp_buf_init(&b);
    cp_diag_init(&d);
    cr_assert_eq(cp_notify_payload(f, a, &b, &d), CP_OK, "%s", d.msg);
    json_error_t err;
    json_t *j = json_loads(b.data, 0, &err);
    cr_assert_not_null(j, "%s payload is not JSON: %s\n%s", cp_webhook_format_name(f), err.text,
                       b.data);
    cp_buf_release(&b);
    return j;
}

static const char *jget(json_t *root, const char *path)
{
    /* "a.b" → root["a"]["b"] as a string (NULL if absent or not a string). */
    char key[64];
    json_t *j = root;
    while (j && *path) {
        size_t n = strcspn(path, ".");
        cr_assert(n < sizeof key);
        memcpy(key, path, n);
        key[n] = '\0';
        j = json_object_get(j, key);
        path += n + (path[n] == '.');
    }
    return json_string_value(j);
}

/* ---- formats ------------------------------------------------------------- */

Test(notify_format, names_round_trip)
{
    for (int f = 0; f < CP_WEBHOOK_FORMAT_COUNT; f++) {
        enum cp_webhook_format got = CP_WEBHOOK_FORMAT_COUNT;
        const char *name = cp_webhook_format_name((enum cp_webhook_format)f);
        cr_assert(cp_webhook_format_parse(name, &got), "%s", name);
        cr_assert_eq((int)got, f);
        cr_assert_not_null(strstr(cp_webhook_format_choices(), name));
    }
    enum cp_webhook_format f = CP_WEBHOOK_GENERIC;
    cr_assert(cp_webhook_format_parse("SLACK", &f));
    cr_assert_eq(f, CP_WEBHOOK_SLACK);
    cr_assert(cp_webhook_format_parse("lark", &f));
    cr_assert_eq(f, CP_WEBHOOK_FEISHU);
    f = CP_WEBHOOK_DINGTALK;
    cr_assert_not(cp_webhook_format_parse("teams", &f));
    cr_assert_not(cp_webhook_format_parse("", &f));
    cr_assert_not(cp_webhook_format_parse(NULL, &f));
    cr_assert_eq(f, CP_WEBHOOK_DINGTALK, "a failed parse leaves *out alone");
    cr_assert_str_eq(cp_webhook_format_name((enum cp_webhook_format)42), "unknown");
}

Test(notify_payload, generic_has_every_field_and_figures_as_an_object)
{
    json_t *j = payload_json(CP_WEBHOOK_GENERIC, &alert);
    cr_assert_str_eq(jget(j, "source"), "cannprof");
    cr_assert_str_eq(jget(j, "event"), "regression");
    cr_assert_str_eq(jget(j, "version"), CP_VERSION_STRING);
    cr_assert_str_eq(jget(j, "service"), "sd-unet");
    cr_assert_str_eq(jget(j, "verdict"), "regressed");
    cr_assert_str_eq(jget(j, "title"), alert.title);
    cr_assert_str_eq(jget(j, "text"), alert.text);
    cr_assert_str_eq(jget(j, "trace"), "/tmp/sd.db");
    cr_assert_str_eq(jget(j, "baseline"), "v1.2");
    json_t *fig = json_object_get(j, "figures");
    cr_assert(json_is_object(fig), "figures is embedded as an object, not a string");
    json_t *lat = json_object_get(fig, "latency_ms");
    cr_assert_float_eq(json_real_value(json_object_get(lat, "after")), 13.4, 1e-12);
    json_decref(j);
}

Test(notify_payload, generic_absent_fields_are_null_and_title_is_made_up)
{
    struct cp_alert a = {.service = "svc", .verdict = "regressed", .text = "x 1 -> 2"};
    json_t *j = payload_json(CP_WEBHOOK_GENERIC, &a);
    cr_assert(json_is_null(json_object_get(j, "trace")));
    cr_assert(json_is_null(json_object_get(j, "baseline")));
    cr_assert(json_is_null(json_object_get(j, "figures")));
    cr_assert_str_eq(jget(j, "title"), "cannprof: regressed in service svc");
    json_decref(j);

    a.event = "inconclusive";
    j = payload_json(CP_WEBHOOK_GENERIC, &a);
    cr_assert_str_eq(jget(j, "event"), "inconclusive");
    json_decref(j);
}

Test(notify_payload, slack_is_text_with_escaped_control_characters)
{
    struct cp_alert a = alert;
    a.text = "p99 <a> & \"b\" > 3\n";
    json_t *j = payload_json(CP_WEBHOOK_SLACK, &a);
    const char *t = jget(j, "text");
    cr_assert_not_null(t);
    cr_assert_not_null(strstr(t, "*cannprof: regression in service sd-unet*"), "%s", t);
    cr_assert_not_null(strstr(t, "p99 &lt;a&gt; &amp; \"b\" &gt; 3"), "%s", t);
    cr_assert_null(strchr(t, '<'), "%s", t);
    cr_assert_not_null(strstr(t, "/tmp/sd.db"));
    cr_assert_not_null(strstr(t, "v1.2"));
    json_decref(j);
}

Test(notify_payload, feishu_is_a_text_message)
{
    json_t *j = payload_json(CP_WEBHOOK_FEISHU, &alert);
    cr_assert_str_eq(jget(j, "msg_type"), "text");
    const char *t = jget(j, "content.text");
    cr_assert_not_null(t);
    cr_assert_eq(strncmp(t, alert.title, strlen(alert.title)), 0, "%s", t);
    cr_assert_not_null(strstr(t, "throughput   82.6 -> 74.6"), "%s", t);
    cr_assert_not_null(strstr(t, "trace: /tmp/sd.db"), "%s", t);
    cr_assert_not_null(strstr(t, "baseline: v1.2"), "%s", t);
    json_decref(j);
}

Test(notify_payload, dingtalk_is_markdown_with_a_title_and_one_item_per_metric)
{
    json_t *j = payload_json(CP_WEBHOOK_DINGTALK, &alert);
    cr_assert_str_eq(jget(j, "msgtype"), "markdown");
    cr_assert_str_eq(jget(j, "markdown.title"), alert.title);
    const char *t = jget(j, "markdown.text");
    cr_assert_not_null(t);
    cr_assert_not_null(strstr(t, "#### cannprof: regression in service sd-unet"), "%s", t);
    cr_assert_not_null(strstr(t, "\n- latency_ms "), "%s", t);
    cr_assert_not_null(strstr(t, "\n- throughput "), "%s", t);
    cr_assert_not_null(strstr(t, "\n- peak_memory "), "%s", t);
    cr_assert_not_null(strstr(t, "cannprof"), "DingTalk keyword filters need the name");
    json_decref(j);
}

Test(notify_payload, quotes_backslashes_unicode_and_bad_utf8_survive)
{
    struct cp_alert a = {.service = "svc \"q\" \\ 延迟",
                         .verdict = "regressed",
                         .text = "line1\n\ttab\nbad \xff\xfe byte\n"};
    json_t *j = payload_json(CP_WEBHOOK_GENERIC, &a);
    cr_assert_str_eq(jget(j, "service"), "svc \"q\" \\ 延迟");
    cr_assert_str_eq(jget(j, "text"), "line1\n\ttab\nbad \xEF\xBF\xBD\xEF\xBF\xBD byte\n");
    json_decref(j);
    for (int f = 1; f < CP_WEBHOOK_FORMAT_COUNT; f++)
        json_decref(payload_json((enum cp_webhook_format)f, &a));
}

Test(notify_payload, chat_formats_cut_a_huge_summary_generic_keeps_it)
{
    struct cp_buf big;
    cp_buf_init(&big);
    for (int i = 0; i < 2000; i++)
        cp_buf_printf(&big, "metric_%04d  1.00 -> 2.00  +100%%  regressed\n", i);
    struct cp_alert a = alert;
    a.text = big.data;
    json_t *j = payload_json(CP_WEBHOOK_GENERIC, &a);
    cr_assert_str_eq(jget(j, "text"), big.data);
    json_decref(j);

    j = payload_json(CP_WEBHOOK_FEISHU, &a);
    const char *t = jget(j, "content.text");
    cr_assert_lt(strlen(t), CP_NOTIFY_CHAT_TEXT_MAX + 1000);
    cr_assert_not_null(strstr(t, "summary cut"), "the cut is said, not silent");
    cr_assert_not_null(strstr(t, "metric_0000"));
    json_decref(j);
    cp_buf_release(&big);
}

Test(notify_payload, bad_figures_and_bad_format_are_invalid)
{
    struct cp_buf b;
    struct cp_diag d;
    struct cp_alert a = alert;
    cp_buf_init(&b);

    a.figures_json = "{\"latency\": ";
    cp_diag_init(&d);
    cr_assert_eq(cp_notify_payload(CP_WEBHOOK_GENERIC, &a, &b, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "figures_json"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "line 1"), "%s", d.msg);

    a.figures_json = "[1, 2]";
    cp_diag_init(&d);
    cr_assert_eq(cp_notify_payload(CP_WEBHOOK_GENERIC, &a, &b, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "object"), "%s", d.msg);

    cp_diag_init(&d);
    cr_assert_eq(cp_notify_payload((enum cp_webhook_format)9, &alert, &b, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "generic|slack|feishu|dingtalk"), "%s", d.msg);

    cp_diag_init(&d);
    cr_assert_eq(cp_notify_payload(CP_WEBHOOK_SLACK, NULL, &b, &d), CP_ERR_INVALID);
    cp_buf_release(&b);
}

/* ---- URL redaction -------------------------------------------------------- */

Test(notify_url, redaction_hides_query_userinfo_and_tokens)
{
    char out[256];
    cp_notify_redact_url("https://oapi.dingtalk.com/robot/send?access_token=abc123", out,
                         sizeof out);
    cr_assert_str_eq(out, "https://oapi.dingtalk.com/robot/send?***");
    cp_notify_redact_url("https://hooks.slack.com/services/T0001/B0001/XXXXXXXXXXXXXXXXXXXXXXXX",
                         out, sizeof out);
    cr_assert_str_eq(out, "https://hooks.slack.com/services/T0001/B0001/***");
    cp_notify_redact_url(
        "https://open.feishu.cn/open-apis/bot/v2/hook/0f6d1a3e-1111-2222-3333-444455556666", out,
        sizeof out);
    cr_assert_str_eq(out, "https://open.feishu.cn/open-apis/bot/v2/hook/***");
    cp_notify_redact_url("http://user:pw@127.0.0.1:8080/hook#frag", out, sizeof out);
    cr_assert_str_eq(out, "http://127.0.0.1:8080/hook#***");
    cp_notify_redact_url("http://h/a?x=1#y", out, sizeof out);
    cr_assert_str_eq(out, "http://h/a?***#***");
    cp_notify_redact_url("", out, sizeof out);
    cr_assert_str_eq(out, "");
    cp_notify_redact_url("http://h/abc", out, 6);
    cr_assert_str_eq(out, "http:");
}

/* ---- delivery ------------------------------------------------------------- */

static void url_of(char *out, size_t size, const struct hook_server *s, const char *path)
{
    snprintf(out, size, "http://127.0.0.1:%d%s", s->port, path);
}

Test(notify_send, delivers_each_format_as_json_post)
{
    for (int f = 0; f < CP_WEBHOOK_FORMAT_COUNT; f++) {
        struct hook_server s;
        cr_assert(server_start(&s, 1, (int[]){200}, NULL));
        char url[128];
        url_of(url, sizeof url, &s, "/hook/abc");
        struct cp_notify_opts o;
        quick_opts(&o, url, (enum cp_webhook_format)f);
        struct cp_diag d;
        cp_diag_init(&d);
        int attempts = -1;
        enum cp_status st = cp_notify_send(&o, &alert, &attempts, &d);
        server_stop(&s);
        cr_assert_eq(st, CP_OK, "%s: %s", cp_webhook_format_name(o.format), d.msg);
        cr_assert_eq(attempts, 1);
        cr_assert_eq(s.requests, 1);
        cr_assert_str_eq(s.method, "POST");
        cr_assert_str_eq(s.path, "/hook/abc");
        cr_assert_str_eq(s.content_type, "application/json");
        cr_assert_str_eq(s.user_agent, "cannprof/" CP_VERSION_STRING);

        /* The server received exactly the payload of that format. */
        struct cp_buf want;
        cp_buf_init(&want);
        cr_assert_eq(cp_notify_payload(o.format, &alert, &want, NULL), CP_OK);
        cr_assert_not_null(s.body);
        cr_assert_str_eq(s.body, want.data);
        json_t *j = json_loads(s.body, 0, NULL);
        cr_assert_not_null(j);
        switch (o.format) {
        case CP_WEBHOOK_GENERIC:
            cr_assert_str_eq(jget(j, "service"), "sd-unet");
            cr_assert(json_is_object(json_object_get(j, "figures")));
            break;
        case CP_WEBHOOK_SLACK:
            cr_assert_not_null(strstr(jget(j, "text"), "latency_ms"));
            break;
        case CP_WEBHOOK_FEISHU:
            cr_assert_str_eq(jget(j, "msg_type"), "text");
            cr_assert_not_null(strstr(jget(j, "content.text"), "latency_ms"));
            break;
        case CP_WEBHOOK_DINGTALK:
            cr_assert_str_eq(jget(j, "msgtype"), "markdown");
            cr_assert_not_null(strstr(jget(j, "markdown.text"), "latency_ms"));
            break;
        }
        json_decref(j);
        cp_buf_release(&want);
        server_release(&s);
    }
}

Test(notify_send, large_body_is_delivered_whole)
{
    struct cp_buf big;
    cp_buf_init(&big);
    for (int i = 0; i < 500; i++)
        cp_buf_printf(&big, "metric_%03d  1.00 -> 2.00  +100%%  regressed\n", i);
    struct cp_alert a = alert;
    a.text = big.data;
    struct hook_server s;
    cr_assert(server_start(&s, 1, (int[]){200}, NULL));
    char url[128];
    url_of(url, sizeof url, &s, "/big");
    struct cp_notify_opts o;
    quick_opts(&o, url, CP_WEBHOOK_GENERIC);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_notify_send(&o, &a, NULL, &d), CP_OK, "%s", d.msg);
    server_stop(&s);
    json_t *j = json_loads(s.body, 0, NULL);
    cr_assert_str_eq(jget(j, "text"), big.data);
    json_decref(j);
    server_release(&s);
    cp_buf_release(&big);
}

Test(notify_send, server_error_is_retried_then_reported)
{
    struct hook_server s;
    cr_assert(server_start(&s, 1, (int[]){500}, "database on fire"));
    char url[128];
    url_of(url, sizeof url, &s, "/hook");
    struct cp_notify_opts o;
    quick_opts(&o, url, CP_WEBHOOK_SLACK);
    o.retries = 3;
    struct cp_diag d;
    cp_diag_init(&d);
    int attempts = 0;
    enum cp_status st = cp_notify_send(&o, &alert, &attempts, &d);
    server_stop(&s);
    cr_assert_eq(st, CP_ERR_IO);
    cr_assert_eq(attempts, 4, "1 + retries attempts");
    cr_assert_eq(s.requests, 4, "the server saw every attempt");
    cr_assert_not_null(strstr(d.msg, url), "names the URL: %s", d.msg);
    cr_assert_not_null(strstr(d.msg, "HTTP 500"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "4 attempts"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "database on fire"), "quotes the answer: %s", d.msg);
    server_release(&s);
}

Test(notify_send, server_that_never_answers_times_out)
{
    struct hook_server s;
    cr_assert(server_start(&s, 1, (int[]){NEVER_ANSWER}, NULL));
    char url[128];
    url_of(url, sizeof url, &s, "/slow");
    struct cp_notify_opts o;
    cp_notify_opts_init(&o);
    o.url = url;
    o.connect_timeout_ms = 300;
    o.timeout_ms = 300;
    o.retries = 1;
    o.backoff_ms = 50;
    struct cp_diag d;
    cp_diag_init(&d);
    int attempts = 0;
    uint64_t t0 = cp_clock_ns();
    enum cp_status st = cp_notify_send(&o, &alert, &attempts, &d);
    uint64_t elapsed = cp_clock_ns() - t0;
    server_stop(&s);
    cr_assert_eq(st, CP_ERR_IO);
    cr_assert_eq(attempts, 2);
    cr_assert_not_null(strstr(d.msg, "2 attempts"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "Timeout"), "%s", d.msg);
    cr_assert_lt(elapsed, 30ull * 1000000000ull, "sanity bound only: the call returned");
    server_release(&s);
}

Test(notify_send, error_then_success_is_delivered_on_attempt_two)
{
    struct hook_server s;
    cr_assert(server_start(&s, 2, (int[]){500, 200}, NULL));
    char url[128];
    url_of(url, sizeof url, &s, "/flaky");
    struct cp_notify_opts o;
    quick_opts(&o, url, CP_WEBHOOK_FEISHU);
    struct cp_diag d;
    cp_diag_init(&d);
    int attempts = 0;
    cr_assert_eq(cp_notify_send(&o, &alert, &attempts, &d), CP_OK, "%s", d.msg);
    server_stop(&s);
    cr_assert_eq(attempts, 2);
    cr_assert_eq(s.requests, 2);
    cr_assert_not(cp_diag_has_error(&d));
    server_release(&s);
}

Test(notify_send, too_many_requests_is_retried)
{
    struct hook_server s;
    cr_assert(server_start(&s, 3, (int[]){429, 429, 200}, NULL));
    char url[128];
    url_of(url, sizeof url, &s, "/limited");
    struct cp_notify_opts o;
    quick_opts(&o, url, CP_WEBHOOK_GENERIC);
    int attempts = 0;
    cr_assert_eq(cp_notify_send(&o, &alert, &attempts, NULL), CP_OK);
    server_stop(&s);
    cr_assert_eq(attempts, 3);
    server_release(&s);
}

Test(notify_send, not_found_is_not_retried)
{
    struct hook_server s;
    cr_assert(server_start(&s, 1, (int[]){404}, NULL));
    char url[128];
    url_of(url, sizeof url, &s, "/gone");
    struct cp_notify_opts o;
    quick_opts(&o, url, CP_WEBHOOK_GENERIC);
    o.retries = 3;
    struct cp_diag d;
    cp_diag_init(&d);
    int attempts = 0;
    cr_assert_eq(cp_notify_send(&o, &alert, &attempts, &d), CP_ERR_IO);
    server_stop(&s);
    cr_assert_eq(attempts, 1);
    cr_assert_eq(s.requests, 1);
    cr_assert_not_null(strstr(d.msg, "HTTP 404"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "1 attempt"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "not retried"), "%s", d.msg);
    server_release(&s);
}

Test(notify_send, chat_service_refusal_in_a_200_is_a_failure)
{
    struct {
        enum cp_webhook_format f;
        const char *answer;
        enum cp_status want;
        const char *in_msg;
    } cases[] = {
        {CP_WEBHOOK_DINGTALK, "{\"errcode\":310000,\"errmsg\":\"keywords not in content\"}",
         CP_ERR_IO, "310000"},
        {CP_WEBHOOK_DINGTALK, "{\"errcode\":0,\"errmsg\":\"ok\"}", CP_OK, NULL},
        {CP_WEBHOOK_FEISHU, "{\"code\":19021,\"msg\":\"sign match fail\"}", CP_ERR_IO,
         "sign match fail"},
        {CP_WEBHOOK_FEISHU, "{\"StatusCode\":0,\"StatusMessage\":\"success\"}", CP_OK, NULL},
        {CP_WEBHOOK_FEISHU, "{\"code\":0,\"msg\":\"success\",\"data\":{}}", CP_OK, NULL},
        /* Only the chat services speak that dialect. */
        {CP_WEBHOOK_GENERIC, "{\"errcode\":5}", CP_OK, NULL},
        {CP_WEBHOOK_SLACK, "ok", CP_OK, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct hook_server s;
        cr_assert(server_start(&s, 1, (int[]){200}, cases[i].answer));
        char url[128];
        url_of(url, sizeof url, &s, "/bot");
        struct cp_notify_opts o;
        quick_opts(&o, url, cases[i].f);
        struct cp_diag d;
        cp_diag_init(&d);
        int attempts = 0;
        enum cp_status st = cp_notify_send(&o, &alert, &attempts, &d);
        server_stop(&s);
        cr_assert_eq(st, cases[i].want, "case %zu: %s", i, d.msg);
        cr_assert_eq(attempts, 1, "case %zu: a refusal is not retried", i);
        if (cases[i].in_msg)
            cr_assert_not_null(strstr(d.msg, cases[i].in_msg), "case %zu: %s", i, d.msg);
        server_release(&s);
    }
}

/* A port that is bound but not listening: connecting to it is refused. */
static int refusing_port(int *fd)
{
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(*fd >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(*fd, (struct sockaddr *)&addr, sizeof addr) == 0);
    socklen_t alen = sizeof addr;
    cr_assert(getsockname(*fd, (struct sockaddr *)&addr, &alen) == 0);
    return ntohs(addr.sin_port);
}

Test(notify_send, connection_refused_is_retried_then_reported)
{
    int fd;
    int port = refusing_port(&fd);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/hook", port);
    struct cp_notify_opts o;
    quick_opts(&o, url, CP_WEBHOOK_GENERIC);
    struct cp_diag d;
    cp_diag_init(&d);
    int attempts = 0;
    cr_assert_eq(cp_notify_send(&o, &alert, &attempts, &d), CP_ERR_IO);
    close(fd);
    cr_assert_eq(attempts, 3);
    cr_assert_not_null(strstr(d.msg, url), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "3 attempts"), "%s", d.msg);
}

Test(notify_send, bad_urls_and_options_are_invalid_and_send_nothing)
{
    const char *bad[] = {"ftp://127.0.0.1/hook", "",
                         "127.0.0.1:80/hook",    "http://",
                         "file:///etc/passwd",   "http://exa mple.com/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct cp_notify_opts o;
        quick_opts(&o, bad[i], CP_WEBHOOK_GENERIC);
        struct cp_diag d;
        cp_diag_init(&d);
        int attempts = -1;
        cr_assert_eq(cp_notify_send(&o, &alert, &attempts, &d), CP_ERR_INVALID, "%s: %s", bad[i],
                     d.msg);
        cr_assert_eq(attempts, 0);
        cr_assert_not_null(strstr(d.msg, "webhook URL"), "%s", d.msg);
    }
    struct cp_notify_opts o;
    quick_opts(&o, NULL, CP_WEBHOOK_GENERIC);
    cr_assert_eq(cp_notify_send(&o, &alert, NULL, NULL), CP_ERR_INVALID);

    const char *named[] = {"timeout", "connect timeout", "retries", "backoff"};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        quick_opts(&o, "http://127.0.0.1:9/hook", CP_WEBHOOK_GENERIC);
        if (i == 0)
            o.timeout_ms = 0;
        else if (i == 1)
            o.connect_timeout_ms = -5;
        else if (i == 2)
            o.retries = 11;
        else
            o.backoff_ms = -1;
        struct cp_diag d;
        cp_diag_init(&d);
        cr_assert_eq(cp_notify_send(&o, &alert, NULL, &d), CP_ERR_INVALID);
        cr_assert_not_null(strstr(d.msg, named[i]), "%s", d.msg);
    }
    quick_opts(&o, "http://127.0.0.1:9/hook", (enum cp_webhook_format)7);
    cr_assert_eq(cp_notify_send(&o, &alert, NULL, NULL), CP_ERR_INVALID);
}

Test(notify_send, messages_never_show_the_secret_parts_of_a_url)
{
    struct hook_server s;
    cr_assert(server_start(&s, 1, (int[]){500}, "bad token SECRETQUERY42"));
    char url[256];
    snprintf(url, sizeof url,
             "http://bob:hunter2@127.0.0.1:%d/services/T01/B01/PATHTOKENabcdefghijklmno"
             "?access_token=SECRETQUERY42",
             s.port);
    struct cp_notify_opts o;
    quick_opts(&o, url, CP_WEBHOOK_DINGTALK);
    o.retries = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_notify_send(&o, &alert, NULL, &d), CP_ERR_IO);
    server_stop(&s);
    cr_assert_eq(s.requests, 1);
    cr_assert_str_eq(s.path,
                     "/services/T01/B01/PATHTOKENabcdefghijklmno"
                     "?access_token=SECRETQUERY42",
                     "the real URL was used");
    cr_assert_null(strstr(d.msg, "SECRETQUERY42"), "%s", d.msg);
    cr_assert_null(strstr(d.msg, "PATHTOKEN"), "%s", d.msg);
    cr_assert_null(strstr(d.msg, "hunter2"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "127.0.0.1"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "?***"), "%s", d.msg);
    server_release(&s);

    /* Refused and rejected URLs alike. */
    int fd;
    int port = refusing_port(&fd);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x?token=SECRETQUERY42", port);
    quick_opts(&o, url, CP_WEBHOOK_GENERIC);
    o.retries = 0;
    cp_diag_init(&d);
    cr_assert_eq(cp_notify_send(&o, &alert, NULL, &d), CP_ERR_IO);
    close(fd);
    cr_assert_null(strstr(d.msg, "SECRETQUERY42"), "%s", d.msg);

    quick_opts(&o, "ftp://example.com/x?token=SECRETQUERY42", CP_WEBHOOK_GENERIC);
    cp_diag_init(&d);
    cr_assert_eq(cp_notify_send(&o, &alert, NULL, &d), CP_ERR_INVALID);
    cr_assert_null(strstr(d.msg, "SECRETQUERY42"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "ftp://example.com/x?***"), "%s", d.msg);
}

Test(notify_send, a_proxy_in_the_environment_is_not_used_for_loopback)
{
    /* Criterion runs each test in its own process: the environment change
     * stays here. Port 9 (discard) on loopback: nothing sensible listens. */
    setenv("http_proxy", "http://127.0.0.1:9", 1);
    setenv("HTTPS_PROXY", "http://127.0.0.1:9", 1);
    setenv("no_proxy", "example.internal", 1);
    struct hook_server s;
    cr_assert(server_start(&s, 1, (int[]){200}, NULL));
    char url[128];
    url_of(url, sizeof url, &s, "/direct");
    struct cp_notify_opts o;
    quick_opts(&o, url, CP_WEBHOOK_GENERIC);
    o.retries = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_notify_send(&o, &alert, NULL, &d), CP_OK, "%s", d.msg);
    server_stop(&s);
    cr_assert_str_eq(s.path, "/direct");
    server_release(&s);
}

/* ---- signed requests ------------------------------------------------------ */

/* Reference values computed with Python 3.11.2's hmac, hashlib and base64
 * modules (Debian 12) for this secret and time; HMAC-SHA256 itself is
 * checked against RFC 4231 test case 2. */
static const char SECRET[] = "SECtest-secret-0123";
static const int64_t NOW_MS = 1796012345678;

Test(notify_sign, hmac_sha256_matches_rfc_4231)
{
    unsigned char mac[CP_HMAC_SHA256_LEN];
    static const char data[] = "what do ya want for nothing?";
    cr_assert(cp_hmac_sha256("Jefe", 4, data, strlen(data), mac));
    char hex[2 * CP_HMAC_SHA256_LEN + 1];
    for (int i = 0; i < CP_HMAC_SHA256_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    cr_assert_str_eq(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

Test(notify_sign, each_service_gets_its_own_signature)
{
    struct cp_notify_signature sig;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_notify_sign(CP_WEBHOOK_FEISHU, SECRET, NOW_MS, NULL, 0, &sig, &d), CP_OK, "%s",
                 d.msg);
    cr_assert_str_eq(sig.timestamp, "1796012345"); /* seconds */
    cr_assert_str_eq(sig.sign, "Uch0FJhuGrv3YL2kCa4sLxas8qDpXNhH6yD5+ghRess=");
    cr_assert_eq(cp_notify_sign(CP_WEBHOOK_DINGTALK, SECRET, NOW_MS, NULL, 0, &sig, &d), CP_OK);
    cr_assert_str_eq(sig.timestamp, "1796012345678"); /* milliseconds */
    cr_assert_str_eq(sig.sign, "6+A/NK2gYqEpMCfJEMDYSAtht9qF7UANQjecNOVeIJw=");
    static const char body[] = "{\"a\":1}";
    cr_assert_eq(cp_notify_sign(CP_WEBHOOK_GENERIC, SECRET, NOW_MS, body, strlen(body), &sig, &d),
                 CP_OK);
    cr_assert_str_eq(sig.timestamp, "1796012345");
    cr_assert_str_eq(sig.sign,
                     "sha256=6461b8bd55ddf4a2d3fe3ef7dec1cec91de39b53ecdfcee18e9e28ee6aadae1e");
    /* slack is not signed; an empty secret is no secret */
    cr_assert_eq(cp_notify_sign(CP_WEBHOOK_SLACK, SECRET, NOW_MS, NULL, 0, &sig, &d),
                 CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "slack"), "%s", d.msg);
    cr_assert_eq(cp_notify_sign(CP_WEBHOOK_GENERIC, "", NOW_MS, NULL, 0, &sig, &d), CP_ERR_INVALID);
}

/* Send `alert` signed in format f to a fresh server at `path`. */
static void send_signed(struct hook_server *s, enum cp_webhook_format f, const char *path)
{
    cr_assert(server_start(s, 1, (int[]){200}, NULL));
    char url[160];
    url_of(url, sizeof url, s, path);
    struct cp_notify_opts o;
    quick_opts(&o, url, f);
    o.secret = SECRET;
    o.now_ms = NOW_MS;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_notify_send(&o, &alert, NULL, &d);
    server_stop(s);
    cr_assert_eq(st, CP_OK, "%s", d.msg);
    cr_assert_eq(s->requests, 1);
}

Test(notify_sign, generic_carries_the_signature_of_the_body_it_sent)
{
    struct hook_server s;
    send_signed(&s, CP_WEBHOOK_GENERIC, "/hook");
    cr_assert_str_eq(s.sig_timestamp, "1796012345");
    /* the signature covers exactly the bytes received */
    struct cp_buf m;
    cp_buf_init(&m);
    cp_buf_printf(&m, "1796012345.%s", s.body);
    unsigned char mac[CP_HMAC_SHA256_LEN];
    cr_assert(cp_hmac_sha256(SECRET, strlen(SECRET), m.data, m.len, mac));
    char want[80] = "sha256=";
    for (int i = 0; i < CP_HMAC_SHA256_LEN; i++)
        snprintf(want + 7 + 2 * i, 3, "%02x", mac[i]);
    cr_assert_str_eq(s.signature, want);
    cr_assert_null(strstr(s.body, SECRET), "the secret itself is never sent");
    cp_buf_release(&m);
    server_release(&s);
}

Test(notify_sign, feishu_gets_timestamp_and_sign_in_the_body)
{
    struct hook_server s;
    send_signed(&s, CP_WEBHOOK_FEISHU, "/open-apis/bot/v2/hook/x");
    json_t *j = json_loads(s.body, 0, NULL);
    cr_assert_not_null(j, "%s", s.body);
    cr_assert_str_eq(jget(j, "timestamp"), "1796012345");
    cr_assert_str_eq(jget(j, "sign"), "Uch0FJhuGrv3YL2kCa4sLxas8qDpXNhH6yD5+ghRess=");
    cr_assert_str_eq(jget(j, "msg_type"), "text");
    cr_assert_not_null(strstr(jget(j, "content.text"), "latency_ms"));
    cr_assert_str_eq(s.signature, "", "no generic headers");
    json_decref(j);
    server_release(&s);
}

Test(notify_sign, dingtalk_gets_timestamp_and_sign_in_the_url)
{
    struct hook_server s;
    send_signed(&s, CP_WEBHOOK_DINGTALK, "/robot/send?access_token=abc");
    cr_assert_str_eq(s.path, "/robot/send?access_token=abc&timestamp=1796012345678"
                             "&sign=6%2BA%2FNK2gYqEpMCfJEMDYSAtht9qF7UANQjecNOVeIJw%3D");
    json_t *j = json_loads(s.body, 0, NULL);
    cr_assert_str_eq(jget(j, "msgtype"), "markdown");
    json_decref(j);
    server_release(&s);
    /* a URL without a query gets one */
    send_signed(&s, CP_WEBHOOK_DINGTALK, "/robot/send");
    cr_assert(strncmp(s.path, "/robot/send?timestamp=1796012345678&sign=", 41) == 0, "%s", s.path);
    server_release(&s);
}

Test(notify_sign, slack_with_a_secret_sends_nothing)
{
    struct hook_server s;
    cr_assert(server_start(&s, 1, (int[]){200}, NULL));
    char url[128];
    url_of(url, sizeof url, &s, "/services/x");
    struct cp_notify_opts o;
    quick_opts(&o, url, CP_WEBHOOK_SLACK);
    o.secret = SECRET;
    struct cp_diag d;
    cp_diag_init(&d);
    int attempts = -1;
    cr_assert_eq(cp_notify_send(&o, &alert, &attempts, &d), CP_ERR_INVALID);
    server_stop(&s);
    cr_assert_eq(attempts, 0);
    cr_assert_eq(s.requests, 0);
    cr_assert_null(strstr(d.msg, SECRET));
    server_release(&s);
}
