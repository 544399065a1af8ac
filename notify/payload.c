/* notify: webhook formats and the request body each service accepts. */
#include "notify/notify.h"

#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

static const char *const format_names[] = {
    [CP_WEBHOOK_GENERIC] = "generic",
    [CP_WEBHOOK_SLACK] = "slack",
    [CP_WEBHOOK_FEISHU] = "feishu",
    [CP_WEBHOOK_DINGTALK] = "dingtalk",
};
static_assert(sizeof format_names / sizeof format_names[0] == CP_WEBHOOK_FORMAT_COUNT,
              "one name per webhook format");

const char *cp_webhook_format_name(enum cp_webhook_format f)
{
    if ((unsigned)f >= CP_WEBHOOK_FORMAT_COUNT)
        return "unknown";
    return format_names[f];
}

bool cp_webhook_format_parse(const char *s, enum cp_webhook_format *out)
{
    if (!s)
        return false;
    for (unsigned i = 0; i < CP_WEBHOOK_FORMAT_COUNT; i++) {
        if (strcasecmp(s, format_names[i]) == 0) {
            *out = (enum cp_webhook_format)i;
            return true;
        }
    }
    /* Lark is Feishu's international edition: same bot API and body. */
    if (strcasecmp(s, "lark") == 0) {
        *out = CP_WEBHOOK_FEISHU;
        return true;
    }
    return false;
}

const char *cp_webhook_format_choices(void)
{
    return "generic|slack|feishu|dingtalk";
}

/* ---- text helpers ------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at p (n bytes available), 0 if invalid
 * (bad lead or continuation byte, overlong form, surrogate, > U+10FFFF). */
static size_t utf8_seq_len(const unsigned char *p, size_t n)
{
    size_t len;
    uint32_t cp, min;
    if (p[0] < 0x80)
        return 1;
    if ((p[0] & 0xE0) == 0xC0) {
        len = 2, cp = p[0] & 0x1F, min = 0x80;
    } else if ((p[0] & 0xF0) == 0xE0) {
        len = 3, cp = p[0] & 0x0F, min = 0x800;
    } else if ((p[0] & 0xF8) == 0xF0) {
        len = 4, cp = p[0] & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* Append s[0..n) with invalid UTF-8 replaced by U+FFFD: jansson refuses
 * invalid strings, and an alert must not fail over a stray byte in a name. */
static void put_utf8(struct cp_buf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t len = utf8_seq_len(p + i, n - i);
        if (len == 0) {
            cp_buf_puts(b, "\xEF\xBF\xBD");
            i++;
        } else {
            cp_buf_append(b, p + i, len);
            i += len;
        }
    }
}

/* A JSON string for s[0..n) (cleaned), or JSON null when s is NULL. NULL only
 * when out of memory. */
static json_t *jstrn(const char *s, size_t n)
{
    if (!s)
        return json_null();
    struct cp_buf b;
    cp_buf_init(&b);
    put_utf8(&b, s, n);
    json_t *j = cp_buf_status(&b) == CP_OK ? json_stringn(b.data ? b.data : "", b.len) : NULL;
    cp_buf_release(&b);
    return j;
}

static json_t *jstr(const char *s)
{
    return jstrn(s, s ? strlen(s) : 0);
}

/* Slack's mrkdwn treats &, < and > as control characters; its docs ask for
 * them as HTML entities, whatever else the text holds. */
static void put_slack_escaped(struct cp_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&':
            cp_buf_puts(b, "&amp;");
            break;
        case '<':
            cp_buf_puts(b, "&lt;");
            break;
        case '>':
            cp_buf_puts(b, "&gt;");
            break;
        default:
            cp_buf_putc(b, s[i]);
        }
    }
}

/* How much of `text` a chat message carries: all of it when short enough,
 * else up to the last line end before the cap (or a UTF-8 boundary when a
 * single line is that long). OUT: *cut. */
static size_t chat_text_len(const char *text, bool *cut)
{
    size_t n = strlen(text);
    *cut = n > CP_NOTIFY_CHAT_TEXT_MAX;
    if (!*cut)
        return n;
    n = CP_NOTIFY_CHAT_TEXT_MAX;
    for (size_t i = n; i > CP_NOTIFY_CHAT_TEXT_MAX / 2; i--) {
        if (text[i] == '\n')
            return i;
    }
    while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* Strip trailing newlines so the message layout does not gain blank lines. */
static size_t trim_trailing_newlines(const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        n--;
    return n;
}

static void default_title(const struct cp_alert *a, struct cp_buf *b)
{
    cp_buf_printf(b, "cannprof: %s", a->verdict ? a->verdict : "alert");
    if (a->service)
        cp_buf_printf(b, " in service %s", a->service);
}

#define CUT_NOTE "(summary cut: too long for a chat message)"

/* The chat message text of a format (not yet a JSON string). */
static void chat_message(enum cp_webhook_format f, const struct cp_alert *a, const char *title,
                         struct cp_buf *m)
{
    bool cut = false;
    const char *text = a->text ? a->text : "";
    size_t n = trim_trailing_newlines(text, chat_text_len(text, &cut));

    switch (f) {
    case CP_WEBHOOK_SLACK:
        /* Bold title, then the summary in a code block so its columns line up. */
        cp_buf_putc(m, '*');
        put_slack_escaped(m, title, strlen(title));
        cp_buf_putc(m, '*');
        if (n > 0) {
            cp_buf_puts(m, "\n```\n");
            put_slack_escaped(m, text, n);
            cp_buf_puts(m, "\n```");
        }
        if (cut)
            cp_buf_puts(m, "\n_" CUT_NOTE "_");
        if (a->trace_path) {
            cp_buf_puts(m, "\ntrace: `");
            put_slack_escaped(m, a->trace_path, strlen(a->trace_path));
            cp_buf_putc(m, '`');
        }
        if (a->baseline_tag) {
            cp_buf_puts(m, "\nbaseline: `");
            put_slack_escaped(m, a->baseline_tag, strlen(a->baseline_tag));
            cp_buf_putc(m, '`');
        }
        break;
    case CP_WEBHOOK_FEISHU:
        cp_buf_puts(m, title);
        if (n > 0) {
            cp_buf_puts(m, "\n\n");
            cp_buf_append(m, text, n);
        }
        if (cut)
            cp_buf_puts(m, "\n" CUT_NOTE);
        if (a->trace_path || a->baseline_tag)
            cp_buf_putc(m, '\n');
        if (a->trace_path)
            cp_buf_printf(m, "\ntrace: %s", a->trace_path);
        if (a->baseline_tag)
            cp_buf_printf(m, "\nbaseline: %s", a->baseline_tag);
        break;
    case CP_WEBHOOK_DINGTALK: {
        /* DingTalk's markdown joins single line breaks, so each metric line
         * becomes a list item and paragraphs are separated by blank lines. */
        cp_buf_printf(m, "#### %s\n\n", title);
        size_t i = 0;
        while (i < n) {
            const char *nl = memchr(text + i, '\n', n - i);
            size_t end = nl ? (size_t)(nl - text) : n;
            size_t len = trim_trailing_newlines(text + i, end - i);
            if (len > 0) {
                cp_buf_puts(m, "- ");
                cp_buf_append(m, text + i, len);
                cp_buf_putc(m, '\n');
            }
            i = end + 1;
        }
        if (cut)
            cp_buf_puts(m, "\n" CUT_NOTE "\n");
        if (a->trace_path)
            cp_buf_printf(m, "\ntrace: %s\n", a->trace_path);
        if (a->baseline_tag)
            cp_buf_printf(m, "\nbaseline: %s\n", a->baseline_tag);
        break;
    }
    case CP_WEBHOOK_GENERIC:
        break;
    }
}

/* Set key to value, taking the reference; false when value is NULL (out of
 * memory) or the set fails. */
static bool put(json_t *obj, const char *key, json_t *value)
{
    return value && json_object_set_new(obj, key, value) == 0;
}

static int dump_to_buf(const char *buffer, size_t size, void *data)
{
    struct cp_buf *b = data;
    cp_buf_append(b, buffer, size);
    return b->failed ? -1 : 0;
}

/* The generic body: every field, figures embedded as an object. */
static enum cp_status generic_payload(const struct cp_alert *a, const char *title, json_t *root,
                                      struct cp_diag *d)
{
    json_t *figures = json_null();
    if (a->figures_json) {
        json_error_t err;
        json_decref(figures);
        figures = json_loads(a->figures_json, 0, &err);
        if (!figures)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "webhook alert: figures_json, line %d column %d: %s", err.line,
                               err.column, err.text);
        if (!json_is_object(figures)) {
            json_decref(figures);
            return cp_diag_set(d, CP_ERR_INVALID,
                               "webhook alert: figures_json must be a JSON object");
        }
    }
    bool ok = put(root, "source", json_string("cannprof")) &&
              put(root, "event", jstr(a->event ? a->event : "regression")) &&
              put(root, "version", json_string(CP_VERSION_STRING)) &&
              put(root, "service", jstr(a->service)) && put(root, "verdict", jstr(a->verdict)) &&
              put(root, "title", jstr(title)) && put(root, "text", jstr(a->text ? a->text : "")) &&
              put(root, "trace", jstr(a->trace_path)) &&
              put(root, "baseline", jstr(a->baseline_tag));
    if (!ok) {
        json_decref(figures);
        return cp_diag_set(d, CP_ERR_NOMEM, "webhook alert: out of memory");
    }
    if (!put(root, "figures", figures))
        return cp_diag_set(d, CP_ERR_NOMEM, "webhook alert: out of memory");
    return CP_OK;
}

/* {"msg_type":"text","content":{"text":...}} and friends. */
static enum cp_status chat_payload(enum cp_webhook_format f, const struct cp_alert *a,
                                   const char *title, json_t *root, struct cp_diag *d)
{
    struct cp_buf m;
    cp_buf_init(&m);
    chat_message(f, a, title, &m);
    /* json_object_set (not _new) keeps our references, released below
     * whatever happened, so no failure path leaks. */
    json_t *msg = cp_buf_status(&m) == CP_OK ? jstrn(m.data ? m.data : "", m.len) : NULL;
    json_t *inner = f == CP_WEBHOOK_SLACK ? NULL : json_object();
    bool ok = msg && (f == CP_WEBHOOK_SLACK || inner);

    switch (f) {
    case CP_WEBHOOK_SLACK:
        ok = ok && json_object_set(root, "text", msg) == 0;
        break;
    case CP_WEBHOOK_FEISHU:
        ok = ok && put(root, "msg_type", json_string("text")) &&
             json_object_set(inner, "text", msg) == 0 &&
             json_object_set(root, "content", inner) == 0;
        break;
    case CP_WEBHOOK_DINGTALK:
        ok = ok && put(root, "msgtype", json_string("markdown")) &&
             put(inner, "title", jstr(title)) && json_object_set(inner, "text", msg) == 0 &&
             json_object_set(root, "markdown", inner) == 0;
        break;
    case CP_WEBHOOK_GENERIC:
        break;
    }
    json_decref(inner);
    json_decref(msg);
    cp_buf_release(&m);
    return ok ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "webhook alert: out of memory");
}

enum cp_status cp_notify_payload(enum cp_webhook_format f, const struct cp_alert *a,
                                 struct cp_buf *out, struct cp_diag *d)
{
    if ((unsigned)f >= CP_WEBHOOK_FORMAT_COUNT)
        return cp_diag_set(d, CP_ERR_INVALID, "webhook format %d: expected one of %s", (int)f,
                           cp_webhook_format_choices());
    if (!a)
        return cp_diag_set(d, CP_ERR_INVALID, "webhook alert: no alert given");

    enum cp_status st;
    struct cp_buf title;
    cp_buf_init(&title);
    if (a->title && a->title[0])
        cp_buf_puts(&title, a->title);
    else
        default_title(a, &title);
    json_t *root = json_object();
    if (!root || cp_buf_status(&title) != CP_OK) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "webhook alert: out of memory");
        goto out_free;
    }

    if (f == CP_WEBHOOK_GENERIC)
        st = generic_payload(a, title.data ? title.data : "", root, d);
    else
        st = chat_payload(f, a, title.data ? title.data : "", root, d);
    if (st != CP_OK)
        goto out_free;

    if (json_dump_callback(root, dump_to_buf, out, JSON_COMPACT) != 0 ||
        cp_buf_status(out) != CP_OK)
        st = cp_diag_set(d, CP_ERR_NOMEM, "webhook alert: out of memory");

out_free:
    json_decref(root);
    cp_buf_release(&title);
    return st;
}
