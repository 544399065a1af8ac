/* notify: delivering an alert over HTTP(S) with libcurl, with timeouts,
 * retries and backoff, and error messages that never show a webhook's
 * secret. */
#include "core/json.h"
#include "notify/notify.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define NOTIFY_TIMEOUT_MAX_MS 600000L
#define NOTIFY_RETRIES_MAX    10
#define NOTIFY_BACKOFF_MAX_MS 60000L
/* Path segments this long are taken for tokens (Slack's are 24 characters,
 * Feishu's a 36-character UUID) and never printed. */
#define SECRET_SEGMENT_MIN 16
/* Enough of a webhook's answer to read its error code and quote it. */
#define RESPONSE_KEEP 4096
#define SNIPPET_MAX   160

void cp_notify_opts_init(struct cp_notify_opts *o)
{
    memset(o, 0, sizeof *o); /* no secret, the clock's time, and what comes later */
    o->format = CP_WEBHOOK_GENERIC;
    o->connect_timeout_ms = 3000;
    o->timeout_ms = 10000;
    o->retries = 3;
    o->backoff_ms = 500;
}

/* ---- URL redaction ------------------------------------------------------ */

/* A bounded writer into a caller's array; always NUL-terminated. */
struct sink {
    char *p;
    size_t size, len;
};

static void sink_put(struct sink *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n && s->len + 1 < s->size; i++)
        s->p[s->len++] = p[i];
    if (s->size)
        s->p[s->len] = '\0';
}

/* Where the authority of `url` starts (after "scheme://"), or NULL when the
 * URL has no scheme. */
static const char *after_scheme(const char *url)
{
    const char *sep = strstr(url, "://");
    if (!sep || sep == url)
        return NULL;
    for (const char *p = url; p < sep; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '+' || *p == '-' || *p == '.'))
            return NULL;
    }
    return sep + 3;
}

void cp_notify_redact_url(const char *url, char *out, size_t size)
{
    struct sink s = {out, size, 0};
    if (size)
        out[0] = '\0';
    if (!url)
        return;
    const char *p = url;
    const char *auth = after_scheme(url);
    if (auth) {
        sink_put(&s, url, (size_t)(auth - url));
        size_t alen = strcspn(auth, "/?#");
        /* Drop "user:password@". */
        const char *host = auth;
        for (const char *q = auth; q < auth + alen; q++)
            if (*q == '@')
                host = q + 1;
        sink_put(&s, host, (size_t)(auth + alen - host));
        p = auth + alen;
    }
    /* The path, segment by segment, up to the query or fragment. */
    size_t plen = strcspn(p, "?#");
    const char *end = p + plen;
    while (p < end) {
        if (*p == '/') {
            sink_put(&s, "/", 1);
            p++;
            continue;
        }
        size_t seg = strcspn(p, "/?#");
        if (seg >= SECRET_SEGMENT_MIN)
            sink_put(&s, "***", 3);
        else
            sink_put(&s, p, seg);
        p += seg;
    }
    if (*p == '?')
        sink_put(&s, "?***", 4);
    if (strchr(p, '#'))
        sink_put(&s, "#***", 4);
}

/* Whether text contains p[0..n) (n > 0). */
static bool contains(const char *text, const char *p, size_t n)
{
    for (; *text; text++)
        if (strncmp(text, p, n) == 0)
            return true;
    return false;
}

/* Whether `text` contains a part of `url` that cp_notify_redact_url hides:
 * user info, a long path segment, the query or the fragment. Used to vet
 * messages that come from elsewhere (curl's, the server's) before quoting. */
static bool leaks_url_secret(const char *text, const char *url)
{
    const char *auth = after_scheme(url);
    const char *p = auth ? auth : url;
    if (auth) {
        size_t alen = strcspn(auth, "/?#");
        const char *at = NULL;
        for (const char *q = auth; q < auth + alen; q++)
            if (*q == '@')
                at = q;
        if (at && at > auth && contains(text, auth, (size_t)(at - auth)))
            return true;
        p = auth + alen;
    }
    while (*p && *p != '?' && *p != '#') {
        size_t seg = strcspn(p, "/?#");
        if (seg >= SECRET_SEGMENT_MIN && contains(text, p, seg))
            return true;
        p += seg ? seg : 1;
    }
    /* Query and fragment: any piece of four or more characters between
     * separators counts (token=abcd1234 leaks as much as abcd1234). */
    while (*p) {
        p++;
        size_t piece = strcspn(p, "?#&=");
        if (piece >= 4 && contains(text, p, piece))
            return true;
        p += piece;
    }
    return false;
}

/* ---- options ------------------------------------------------------------ */

static bool has_prefix_icase(const char *s, const char *prefix)
{
    return strncasecmp(s, prefix, strlen(prefix)) == 0;
}

static enum cp_status check_opts(const struct cp_notify_opts *o, const char *shown,
                                 struct cp_diag *d)
{
    if (!o->url || !o->url[0])
        return cp_diag_set(d, CP_ERR_INVALID,
                           "webhook URL is empty: expected http://HOST/PATH or https://HOST/PATH");
    if (!has_prefix_icase(o->url, "http://") && !has_prefix_icase(o->url, "https://"))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "webhook URL %s: only http:// and https:// URLs are accepted", shown);
    if ((unsigned)o->format >= CP_WEBHOOK_FORMAT_COUNT)
        return cp_diag_set(d, CP_ERR_INVALID, "webhook format %d: expected one of %s",
                           (int)o->format, cp_webhook_format_choices());
    if (o->connect_timeout_ms < 1 || o->connect_timeout_ms > NOTIFY_TIMEOUT_MAX_MS)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "webhook connect timeout %ld ms: expected 1 to %ld ms",
                           o->connect_timeout_ms, NOTIFY_TIMEOUT_MAX_MS);
    if (o->timeout_ms < 1 || o->timeout_ms > NOTIFY_TIMEOUT_MAX_MS)
        return cp_diag_set(d, CP_ERR_INVALID, "webhook timeout %ld ms: expected 1 to %ld ms",
                           o->timeout_ms, NOTIFY_TIMEOUT_MAX_MS);
    if (o->retries < 0 || o->retries > NOTIFY_RETRIES_MAX)
        return cp_diag_set(d, CP_ERR_INVALID, "webhook retries %d: expected 0 to %d", o->retries,
                           NOTIFY_RETRIES_MAX);
    if (o->backoff_ms < 0 || o->backoff_ms > NOTIFY_BACKOFF_MAX_MS)
        return cp_diag_set(d, CP_ERR_INVALID, "webhook backoff %ld ms: expected 0 to %ld ms",
                           o->backoff_ms, NOTIFY_BACKOFF_MAX_MS);

    /* libcurl's own parser: the URL it will use must be one it accepts. */
    CURLU *u = curl_url();
    if (!u)
        return cp_diag_set(d, CP_ERR_NOMEM, "webhook URL %s: out of memory", shown);
    enum cp_status st = CP_OK;
    char *host = NULL;
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, o->url, 0);
    if (uc == CURLUE_OK)
        uc = curl_url_get(u, CURLUPART_HOST, &host, 0);
    if (uc != CURLUE_OK || !host || !host[0])
        st = cp_diag_set(d, CP_ERR_INVALID, "webhook URL %s: malformed (%s)", shown,
                         uc != CURLUE_OK ? curl_url_strerror(uc) : "no host");
    curl_free(host);
    curl_url_cleanup(u);
    return st;
}

/* ---- one delivery ------------------------------------------------------- */

struct response {
    char data[RESPONSE_KEEP + 1];
    size_t len;
};

/* Keep the start of the answer, swallow the rest: returning less than given
 * would abort the transfer. */
static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct response *r = userdata;
    size_t n = size * nmemb;
    size_t room = RESPONSE_KEEP - r->len;
    size_t take = n < room ? n : room;
    memcpy(r->data + r->len, ptr, take);
    r->len += take;
    r->data[r->len] = '\0';
    return n;
}

/* What one attempt came to. */
enum outcome {
    OUTCOME_DELIVERED,
    OUTCOME_RETRY, /* may succeed later */
    OUTCOME_FAIL,  /* will not: give up now */
};

/* Curl errors worth another attempt: everything but configuration, TLS
 * trust and local problems, which the next attempt would meet again. */
static bool curl_error_is_transient(CURLcode rc)
{
    switch (rc) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_FUNCTION_NOT_FOUND:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_LOGIN_DENIED:
    case CURLE_TOO_MANY_REDIRECTS:
        return false;
    default:
        return true;
    }
}

/* Feishu and DingTalk answer 200 with an error code in the body when they
 * refuse a message. OUT: a description into why[size] when refused. */
static bool chat_service_refused(enum cp_webhook_format f, const struct response *r, char *why,
                                 size_t size)
{
    static const struct {
        enum cp_webhook_format format;
        const char *code_key, *msg_key;
    } keys[] = {
        {CP_WEBHOOK_DINGTALK, "errcode", "errmsg"},
        {CP_WEBHOOK_FEISHU, "code", "msg"},
        {CP_WEBHOOK_FEISHU, "StatusCode", "StatusMessage"},
    };
    if (f != CP_WEBHOOK_FEISHU && f != CP_WEBHOOK_DINGTALK)
        return false;
    json_t *root = json_loadb(r->data, r->len, 0, NULL);
    bool refused = false;
    for (size_t i = 0; root && !refused && i < sizeof keys / sizeof keys[0]; i++) {
        if (keys[i].format != f)
            continue;
        json_t *code = json_object_get(root, keys[i].code_key);
        if (!json_is_integer(code) || json_integer_value(code) == 0)
            continue;
        const char *msg = json_string_value(json_object_get(root, keys[i].msg_key));
        snprintf(why, size, "%s %lld%s%s", keys[i].code_key, (long long)json_integer_value(code),
                 msg ? ": " : "", msg ? msg : "");
        refused = true;
    }
    json_decref(root);
    return refused;
}

static enum outcome classify(CURLcode rc, long status, enum cp_webhook_format f,
                             const struct response *r, char *why, size_t size)
{
    if (rc != CURLE_OK)
        return curl_error_is_transient(rc) ? OUTCOME_RETRY : OUTCOME_FAIL;
    if (status >= 200 && status < 300)
        return chat_service_refused(f, r, why, size) ? OUTCOME_FAIL : OUTCOME_DELIVERED;
    if (status == 429 || status >= 500 || status == 0)
        return OUTCOME_RETRY;
    return OUTCOME_FAIL;
}

/* A quotable, single-line start of the server's answer ("" when it is
 * empty or would show a secret of the URL). */
static void response_snippet(const struct response *r, const char *url, char *out, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < r->len && n + 1 < size && n < SNIPPET_MAX; i++) {
        unsigned char c = (unsigned char)r->data[i];
        out[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : ' ';
    }
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
    if (leaks_url_secret(out, url))
        out[0] = '\0';
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* curl ignores no_proxy from the environment once CURLOPT_NOPROXY is set, so
 * the user's list is kept and loopback added: a local receiver must never go
 * through a proxy. Caller frees. */
static char *noproxy_list(void)
{
    const char *env = getenv("no_proxy");
    if (!env || !env[0])
        env = getenv("NO_PROXY");
    struct cp_buf b;
    cp_buf_init(&b);
    /* curl honours "*" (no proxy at all) only as the whole list. */
    if (env && strcmp(env, "*") == 0)
        return cp_strdup("*");
    if (env && env[0])
        cp_buf_printf(&b, "%s,", env);
    cp_buf_puts(&b, "127.0.0.1,localhost,::1");
    if (cp_buf_status(&b) != CP_OK) {
        cp_buf_release(&b);
        return NULL;
    }
    return cp_buf_steal(&b);
}

/* The options every attempt shares. */
static bool setup_handle(CURL *h, const struct cp_notify_opts *o, const char *url,
                         const struct cp_buf *body, struct curl_slist *headers, const char *noproxy,
                         char *errbuf, struct response *resp)
{
    bool ok = true;
#define SET(opt, val) ok = ok && curl_easy_setopt(h, opt, val) == CURLE_OK
    SET(CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
#else
    SET(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    SET(CURLOPT_POST, 1L);
    SET(CURLOPT_POSTFIELDS, body->data);
    SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
    SET(CURLOPT_HTTPHEADER, headers);
    SET(CURLOPT_USERAGENT, "cannprof/" CP_VERSION_STRING);
    SET(CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
    SET(CURLOPT_TIMEOUT_MS, o->timeout_ms);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_NOPROXY, noproxy);
    /* A webhook that redirects is misconfigured; re-POSTing elsewhere would be
     * a surprise. */
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    /* Each attempt on a fresh connection: a retry must not ride on the socket
     * of the attempt that failed. */
    SET(CURLOPT_FORBID_REUSE, 1L);
    SET(CURLOPT_ERRORBUFFER, errbuf);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, resp);
#undef SET
    return ok;
}

/* What a signature changes in the request. */
struct signed_req {
    char *url;        /* NULL: o->url */
    char *headers[2]; /* extra header lines; NULL: none */
};

/* The send loop proper, once curl is initialised and the body built. */
static enum cp_status deliver(const struct cp_notify_opts *o, const struct signed_req *sr,
                              const struct cp_buf *body, const char *shown, int *attempts,
                              struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    const char *fmt = cp_webhook_format_name(o->format);
    char errbuf[CURL_ERROR_SIZE];
    char why[256] = "";
    char snippet[SNIPPET_MAX + 1] = "";
    struct response *resp = calloc(1, sizeof *resp);
    char *noproxy = noproxy_list();
    struct curl_slist *headers = NULL, *tmp;
    CURL *h = curl_easy_init();

    /* "Expect:" stops curl from waiting for a 100-continue on larger bodies. */
    static const char *const header_lines[] = {"Content-Type: application/json", "Expect:"};
    for (size_t i = 0; i < sizeof header_lines / sizeof header_lines[0]; i++) {
        tmp = curl_slist_append(headers, header_lines[i]);
        if (!tmp) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "webhook %s: out of memory", shown);
            goto out_free;
        }
        headers = tmp;
    }
    for (size_t i = 0; i < 2 && sr->headers[i]; i++) {
        tmp = curl_slist_append(headers, sr->headers[i]);
        if (!tmp) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "webhook %s: out of memory", shown);
            goto out_free;
        }
        headers = tmp;
    }
    if (!resp || !noproxy) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "webhook %s: out of memory", shown);
        goto out_free;
    }
    if (!h ||
        !setup_handle(h, o, sr->url ? sr->url : o->url, body, headers, noproxy, errbuf, resp)) {
        st = cp_diag_set(d, CP_ERR_INTERNAL, "webhook %s: cannot set up a libcurl handle", shown);
        goto out_free;
    }

    CURLcode rc = CURLE_OK;
    long status = 0, wait_ms = o->backoff_ms;
    enum outcome oc = OUTCOME_FAIL;
    int tries = 0;
    for (int i = 0; i <= o->retries; i++) {
        if (i > 0) {
            sleep_ms(wait_ms);
            wait_ms = wait_ms * 2 > NOTIFY_BACKOFF_MAX_MS ? NOTIFY_BACKOFF_MAX_MS : wait_ms * 2;
        }
        errbuf[0] = '\0';
        resp->len = 0;
        resp->data[0] = '\0';
        why[0] = '\0';
        status = 0;
        rc = curl_easy_perform(h);
        tries++;
        if (rc == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        oc = classify(rc, status, o->format, resp, why, sizeof why);
        if (oc != OUTCOME_RETRY)
            break;
    }
    if (attempts)
        *attempts = tries;
    if (oc == OUTCOME_DELIVERED)
        goto out_free;

    const char *plural = tries == 1 ? "" : "s";
    const char *retry_note = oc == OUTCOME_FAIL ? " (not retried)" : "";
    if (rc != CURLE_OK) {
        /* curl's detail, unless it only repeats the summary or shows a secret. */
        bool detail = errbuf[0] && !leaks_url_secret(errbuf, o->url) &&
                      !strstr(errbuf, curl_easy_strerror(rc));
        st = cp_diag_set(d, CP_ERR_IO,
                         "webhook %s (%s): not delivered after %d attempt%s: %s%s%s%s%s", shown,
                         fmt, tries, plural, curl_easy_strerror(rc), detail ? " (" : "",
                         detail ? errbuf : "", detail ? ")" : "", retry_note);
    } else if (why[0]) {
        st = cp_diag_set(d, CP_ERR_IO,
                         "webhook %s (%s): not delivered after %d attempt%s: HTTP %ld but the "
                         "service refused the message: %s%s",
                         shown, fmt, tries, plural, status, why, retry_note);
    } else {
        response_snippet(resp, o->url, snippet, sizeof snippet);
        st = cp_diag_set(d, CP_ERR_IO,
                         "webhook %s (%s): not delivered after %d attempt%s: last answer HTTP "
                         "%ld%s%s%s%s",
                         shown, fmt, tries, plural, status, snippet[0] ? " \"" : "", snippet,
                         snippet[0] ? "\"" : "", retry_note);
    }

out_free:
    if (h)
        curl_easy_cleanup(h);
    curl_slist_free_all(headers);
    free(noproxy);
    free(resp);
    return st;
}

/* Now, in Unix milliseconds. */
static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Apply o->secret to the request: headers (generic), fields in the body
 * (feishu) or the URL (dingtalk). Needs curl initialised (URL escaping). */
static enum cp_status sign_request(const struct cp_notify_opts *o, struct cp_buf *body,
                                   struct signed_req *sr, const char *shown, struct cp_diag *d)
{
    struct cp_notify_signature sig;
    enum cp_status st = cp_notify_sign(o->format, o->secret, o->now_ms ? o->now_ms : wall_ms(),
                                       body->data, body->len, &sig, d);
    if (st != CP_OK)
        return st;
    struct cp_buf b;
    cp_buf_init(&b);
    switch (o->format) {
    case CP_WEBHOOK_GENERIC:
        cp_buf_printf(&b, "X-Cannprof-Timestamp: %s", sig.timestamp);
        sr->headers[0] = cp_buf_steal(&b);
        cp_buf_init(&b);
        cp_buf_printf(&b, "X-Cannprof-Signature: %s", sig.sign);
        sr->headers[1] = cp_buf_steal(&b);
        if (!sr->headers[0] || !sr->headers[1])
            st = CP_ERR_NOMEM;
        break;
    case CP_WEBHOOK_FEISHU: {
        /* the payload is one JSON object: the two fields go first */
        json_t *payload = json_loadb(body->data, body->len, 0, NULL);
        if (!json_is_object(payload)) {
            json_decref(payload);
            return cp_diag_set(d, CP_ERR_INTERNAL, "webhook %s: the payload is not an object",
                               shown);
        }
        json_t *out = json_object();
        bool ok = out && cp_json_set_str(out, "timestamp", sig.timestamp) &&
                  cp_json_set_str(out, "sign", sig.sign);
        const char *key;
        json_t *v;
        json_object_foreach(payload, key, v)
        {
            ok = ok && json_object_set(out, key, v) == 0;
        }
        st = ok ? cp_json_dump(out, false, &b) : CP_ERR_NOMEM;
        json_decref(out);
        json_decref(payload);
        if (st == CP_OK) {
            cp_buf_release(body);
            *body = b;
            cp_buf_init(&b);
        }
        break;
    }
    case CP_WEBHOOK_DINGTALK: {
        char *esc = curl_easy_escape(NULL, sig.sign, 0);
        if (!esc) {
            st = CP_ERR_NOMEM;
            break;
        }
        cp_buf_printf(&b, "%s%stimestamp=%s&sign=%s", o->url, strchr(o->url, '?') ? "&" : "?",
                      sig.timestamp, esc);
        curl_free(esc);
        sr->url = cp_buf_steal(&b);
        if (!sr->url)
            st = CP_ERR_NOMEM;
        break;
    }
    default:
        break;
    }
    cp_buf_release(&b);
    if (st != CP_OK)
        return cp_diag_set(d, st, "webhook %s: out of memory signing the request", shown);
    return CP_OK;
}

enum cp_status cp_notify_send(const struct cp_notify_opts *o, const struct cp_alert *a,
                              int *attempts, struct cp_diag *d)
{
    if (attempts)
        *attempts = 0;
    if (!o || !a)
        return cp_diag_set(d, CP_ERR_INVALID, "webhook: no %s given", o ? "alert" : "options");

    char shown[512];
    cp_notify_redact_url(o->url, shown, sizeof shown);
    enum cp_status st = check_opts(o, shown, d);
    if (st != CP_OK)
        return st;

    struct cp_buf body;
    cp_buf_init(&body);
    struct signed_req sr = {0};
    st = cp_notify_payload(o->format, a, &body, d);
    if (st != CP_OK)
        goto out_body;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        st = cp_diag_set(d, CP_ERR_INTERNAL, "webhook %s: libcurl cannot be initialised", shown);
        goto out_body;
    }
    if (!o->secret || (st = sign_request(o, &body, &sr, shown, d)) == CP_OK)
        st = deliver(o, &sr, &body, shown, attempts, d);
    curl_global_cleanup();

out_body:
    free(sr.url);
    free(sr.headers[0]);
    free(sr.headers[1]);
    cp_buf_release(&body);
    return st;
}
