/*
 * notify: webhook alerts over libcurl.
 *
 * When a validation finds a regression, cannprof tells a team channel. An
 * alert (`struct cp_alert`) is plain data: a title, the service, the overall
 * verdict, a multi-line summary with one line per metric, and optionally the
 * per-metric figures as a JSON object, the trace path and the baseline tag.
 * cp_notify_payload() renders it as the request body a service accepts:
 *
 *   generic   {"source":"cannprof","event":"regression","version":...,
 *              "service":...,"verdict":...,"title":...,"text":...,
 *              "trace":...|null,"baseline":...|null,"figures":{...}|null}
 *   slack     incoming webhook: {"text": mrkdwn}, the summary in a code block
 *             (&, < and > escaped as Slack requires)
 *   feishu    Feishu/Lark custom bot: {"msg_type":"text","content":{"text":...}}
 *   dingtalk  DingTalk custom robot:
 *             {"msgtype":"markdown","markdown":{"title":...,"text":...}}
 *
 * The chat formats cap the summary at CP_NOTIFY_CHAT_TEXT_MAX bytes (the
 * services refuse bodies of about 20 KB); the generic payload is never cut.
 *
 * cp_notify_send() POSTs the body (Content-Type: application/json, User-Agent
 * cannprof/<version>) with a connect timeout and a total timeout per attempt,
 * and retries with doubling backoff what may succeed later: 5xx, 429,
 * connection failures and timeouts. Other 4xx (and 3xx: redirects are not
 * followed) fail at once. Feishu and DingTalk answer HTTP 200 even when they
 * reject a message (bad signature, missing keyword); for those two formats a
 * 2xx answer whose JSON carries a non-zero "code"/"StatusCode"/"errcode" is a
 * failure too, not retried. So a send either delivers or fails with a message,
 * after at most (1 + retries) * timeout_ms plus the backoff waits: it never
 * hangs and never drops silently. Messages never show a URL's query string,
 * user info or long path segments, which is where webhook services put their
 * secret tokens.
 *
 * Signed requests. With a secret (cp_notify_opts.secret), a request carries
 * the HMAC-SHA256 signature its service checks, taken once per send (retries
 * reuse it; the services accept a timestamp up to an hour old):
 *
 *   generic   headers X-Cannprof-Timestamp: <unix seconds> and
 *             X-Cannprof-Signature: sha256=<hex HMAC(secret, "<timestamp>.<body>")>
 *   feishu    "timestamp": "<unix seconds>" and "sign": base64 of the HMAC
 *             whose key is "<timestamp>\n<secret>" over an empty message,
 *             added to the JSON body (the bot's "signature verification")
 *   dingtalk  &timestamp=<unix ms>&sign=<URL-encoded base64 HMAC(secret,
 *             "<timestamp>\n<secret>")> appended to the URL ("加签")
 *   slack     refused: an incoming webhook's secret is its URL
 *
 * The secret is never printed.
 *
 * Nothing here keeps global state; curl_global_init/cleanup bracket each send
 * (libcurl reference-counts them).
 */
#ifndef CP_NOTIFY_H
#define CP_NOTIFY_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cp_webhook_format {
    CP_WEBHOOK_GENERIC = 0,
    CP_WEBHOOK_SLACK,
    CP_WEBHOOK_FEISHU,
    CP_WEBHOOK_DINGTALK,
};
#define CP_WEBHOOK_FORMAT_COUNT 4

/* "generic", "slack", "feishu", "dingtalk" ("unknown" for values outside the
 * enum). Never NULL. */
const char *cp_webhook_format_name(enum cp_webhook_format f);

/* Parse one of the names above (ASCII case ignored; "lark" is accepted for
 * feishu). OUT: *out, untouched on failure. false for anything else,
 * including NULL. */
bool cp_webhook_format_parse(const char *s, enum cp_webhook_format *out);

/* The names accepted by cp_webhook_format_parse, for error messages:
 * "generic|slack|feishu|dingtalk". */
const char *cp_webhook_format_choices(void);

/* An alert. All strings are borrowed; NULL means absent. */
struct cp_alert {
    /* "cannprof: regression in service S"; when NULL or empty, one is made
     * from verdict and service. */
    const char *title;
    const char *service;
    const char *verdict; /* overall verdict, e.g. "regressed" */
    const char *text;    /* plain multi-line summary: one line per metric */
    /* A JSON object with the per-metric figures (embedded as an object in the
     * generic payload, not as a string); may be NULL. */
    const char *figures_json;
    const char *trace_path, *baseline_tag; /* may be NULL */
    const char *event; /* the generic payload's "event"; NULL means "regression" */
};

/* Chat formats carry at most this many bytes of cp_alert.text (cut at a line
 * end when possible, with a note saying so). */
#define CP_NOTIFY_CHAT_TEXT_MAX 12000

struct cp_notify_opts {
    const char *url; /* http:// or https:// only; anything else is CP_ERR_INVALID */
    enum cp_webhook_format format;
    long connect_timeout_ms; /* default 3000; 1 .. 600000 */
    long timeout_ms;         /* total per attempt, default 10000; 1 .. 600000 */
    int retries;             /* extra attempts after the first, default 3; 0 .. 10 */
    long backoff_ms;         /* first wait, doubled each retry, default 500; 0 .. 60000
                                (a single wait never exceeds 60 s) */
    const char *secret;      /* sign the request (see "Signed requests"); NULL: do not */
    int64_t now_ms;          /* the signing time, Unix ms; 0: the clock's (tests fix it) */
};

/* Fill `o` with the defaults above (url and secret NULL, format generic). */
void cp_notify_opts_init(struct cp_notify_opts *o);

/* The request body of alert `a` in format `f`. OUT: the JSON text is
 * appended to *out (the caller owns and releases the buffer; on failure *out
 * may hold a partial append). Errors: CP_ERR_INVALID for an unknown format, a
 * NULL alert or figures_json that is not a JSON object (the message gives
 * jansson's line and column); CP_ERR_NOMEM. Invalid UTF-8 in the strings is
 * replaced with U+FFFD rather than refused. */
enum cp_status cp_notify_payload(enum cp_webhook_format f, const struct cp_alert *a,
                                 struct cp_buf *out, struct cp_diag *d);

/* Send alert `a` to o->url in o->format. 2xx = delivered (see the module
 * comment for Feishu/DingTalk bodies). 5xx, 429, connection errors and
 * timeouts are retried with backoff; other statuses are not retried.
 * OUT: *attempts (may be NULL): the requests made, 0 when none was (bad
 * options). Errors: CP_ERR_INVALID for a URL that is not http(s) or is
 * malformed, or options out of range (the message names the option);
 * CP_ERR_IO when the alert was not delivered: the message names the URL
 * (redacted), the last HTTP status or curl error and the number of attempts;
 * CP_ERR_INTERNAL when libcurl cannot be initialised; CP_ERR_NOMEM. */
enum cp_status cp_notify_send(const struct cp_notify_opts *o, const struct cp_alert *a,
                              int *attempts, struct cp_diag *d);

/* HMAC-SHA256 (RFC 2104) of msg under key. OUT: mac. false when libcrypto
 * fails or the key is too long for it. */
#define CP_HMAC_SHA256_LEN 32
bool cp_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                    unsigned char mac[CP_HMAC_SHA256_LEN]);

/* A request's signature: the timestamp as the service wants it (seconds or,
 * for DingTalk, milliseconds) and the signature text ("sha256=<hex>" for
 * generic, base64 for Feishu and DingTalk, not URL-encoded). */
struct cp_notify_signature {
    char timestamp[24];
    char sign[80];
};

/* Sign `body` (used by generic only) for format f at time now_ms. Errors:
 * CP_ERR_INVALID for an empty secret or a format that is not signed
 * (slack); CP_ERR_INTERNAL when libcrypto fails; CP_ERR_NOMEM. */
enum cp_status cp_notify_sign(enum cp_webhook_format f, const char *secret, int64_t now_ms,
                              const char *body, size_t body_len, struct cp_notify_signature *out,
                              struct cp_diag *d);

/* The form of `url` that may be shown: scheme://host[:port]/path with user
 * info dropped, the query and fragment replaced by "?***" / "#***", and every
 * path segment of 16 or more characters shown as "***". OUT: written into
 * out[size], always NUL-terminated (cut if too small). */
void cp_notify_redact_url(const char *url, char *out, size_t size);

#endif
