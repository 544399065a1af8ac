/* Test support: headless Chromium (see browser.h). */
#include "support/browser.h"

#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include <png.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Seconds a browser may take before `timeout` ends it (then kills it 5 s
 * later): far beyond the second or two a page takes, for a loaded machine. */
#define BROWSER_TIMEOUT "120"
/* Virtual milliseconds the page's timers get before the DOM is taken. */
#define VIRTUAL_TIME "10000"

static const char *browser_path(void)
{
    const char *e = getenv("CT_CHROMIUM");
    return e && *e ? e : "/usr/bin/chromium";
}

bool ct_browser_available(void)
{
    struct stat st;
    return stat(browser_path(), &st) == 0 && S_ISREG(st.st_mode) &&
           access(browser_path(), X_OK) == 0;
}

size_t ct_count(const char *hay, const char *needle)
{
    size_t n = 0, len = needle ? strlen(needle) : 0;
    if (!hay || len == 0)
        return 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + len, needle))
        n++;
    return n;
}

/* file://ABSOLUTE-PATH?QUERY, the path percent-encoded where it must be. */
static char *file_url(const char *file_path, const char *query)
{
    char abs[PATH_MAX];
    if (!realpath(file_path, abs)) {
        fprintf(stderr, "browser: %s: no such file\n", file_path);
        return NULL;
    }
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, "file://");
    for (const unsigned char *p = (const unsigned char *)abs; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("/._-~", *p))
            cp_buf_putc(&b, (char)*p);
        else
            cp_buf_printf(&b, "%%%02X", *p);
    }
    if (query && *query)
        cp_buf_printf(&b, "?%s", query);
    return cp_buf_status(&b) == CP_OK ? cp_buf_steal(&b) : NULL;
}

/* A fresh profile folder for one browser. */
static char *profile_dir(void)
{
    char *tmpl = cp_t_fmt("%s/chromium-profile-XXXXXX", cp_t_dir ? cp_t_dir : "/tmp");
    if (!mkdtemp(tmpl)) {
        fprintf(stderr, "browser: cannot make a profile folder like %s\n", tmpl);
        free(tmpl);
        return NULL;
    }
    return tmpl;
}

/* The last `n` bytes of s, for messages. */
static const char *tail(const char *s, size_t n)
{
    size_t len = s ? strlen(s) : 0;
    return !s ? "" : len > n ? s + len - n : s;
}

/* Run the browser on `url` with `extra` (one flag: --dump-dom or
 * --screenshot=...; `size` a --window-size flag or NULL). Retries once
 * when it fails or `ok` says its output is not there. */
static bool run_browser(const char *url, const char *extra, const char *size, struct cp_run *r,
                        bool (*ok)(const struct cp_run *r, const void *arg), const void *arg)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        char *profile = profile_dir();
        if (!profile)
            return false;
        char *user_data = cp_t_fmt("--user-data-dir=%s", profile);
        const char *argv[40];
        size_t n = 0;
        argv[n++] = "/usr/bin/timeout";
        argv[n++] = "-k";
        argv[n++] = "5";
        argv[n++] = BROWSER_TIMEOUT;
        argv[n++] = browser_path();
        argv[n++] = "--headless";
        argv[n++] = "--disable-gpu";
        argv[n++] = "--no-sandbox"; /* tests run as root */
        argv[n++] = "--disable-dev-shm-usage";
        argv[n++] = user_data;
        argv[n++] = "--no-first-run";
        argv[n++] = "--no-default-browser-check";
        argv[n++] = "--disable-extensions";
        argv[n++] = "--disable-sync";
        argv[n++] = "--disable-background-networking";
        argv[n++] = "--disable-component-update";
        argv[n++] = "--mute-audio";
        argv[n++] = "--hide-scrollbars";
        argv[n++] = "--force-device-scale-factor=1";
        /* the page's console messages and uncaught exceptions, on stderr:
         * "[...:INFO:CONSOLE:5] "Uncaught Error: ...", source: URL (5)" */
        argv[n++] = "--enable-logging=stderr";
        argv[n++] = "--v=0";
        argv[n++] = "--virtual-time-budget=" VIRTUAL_TIME;
        if (size)
            argv[n++] = size;
        argv[n++] = extra;
        argv[n++] = url;
        argv[n] = NULL;
        cp_run_argv(r, (char *const *)argv);
        cp_scratch_remove(profile);
        free(user_data);
        free(profile);
        if (r->exit_code == 0 && ok(r, arg))
            return true;
        fprintf(stderr, "browser: %s %s %s: exit %d (signal %d)%s; stderr ends:\n%s\n",
                browser_path(), extra, url, r->exit_code, r->signal,
                r->exit_code == 124 ? ", timed out after " BROWSER_TIMEOUT " s" : "",
                tail(r->err, 2000));
        if (attempt == 0) {
            cp_run_release(r);
            fprintf(stderr, "browser: trying once more\n");
        }
    }
    return false;
}

/* A page's DOM: an HTML document, or an SVG one (a flame graph opened
 * directly). */
static bool dom_ok(const struct cp_run *r, const void *arg)
{
    (void)arg;
    return r->out && (strstr(r->out, "<html") || strstr(r->out, "<svg"));
}

/* The console lines of a browser's stderr: the text after "] " of every
 * line with ":CONSOLE" in its prefix. */
static char *console_lines(const char *err)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, "");
    for (const char *p = err ? err : ""; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *close = memchr(p, ']', len);
        const char *tag = strstr(p, ":CONSOLE");
        if (p[0] == '[' && close && tag && tag < close) {
            const char *msg = close + 1 + (close[1] == ' ');
            cp_buf_append(&b, msg, len - (size_t)(msg - p));
            cp_buf_putc(&b, '\n');
        }
        p += len + (eol != NULL);
    }
    return cp_buf_status(&b) == CP_OK ? cp_buf_steal(&b) : NULL;
}

char *ct_browser_dom(const char *file_path, const char *query, char **console)
{
    if (console)
        *console = NULL;
    char *url = file_url(file_path, query);
    if (!url)
        return NULL;
    struct cp_run r;
    char *dom = NULL;
    if (run_browser(url, "--dump-dom", NULL, &r, dom_ok, NULL)) {
        dom = r.out;
        r.out = NULL;
        if (console)
            *console = console_lines(r.err);
    }
    cp_run_release(&r);
    free(url);
    return dom;
}

static bool png_ok(const struct cp_run *r, const void *arg)
{
    (void)r;
    struct stat st;
    return stat((const char *)arg, &st) == 0 && st.st_size > 0;
}

bool ct_browser_screenshot(const char *file_path, const char *query, const char *png_out, int w,
                           int h)
{
    char *url = file_url(file_path, query);
    if (!url)
        return false;
    char abs_dir[PATH_MAX];
    char *dir = cp_path_dirname(png_out);
    bool ok = dir && realpath(dir, abs_dir);
    free(dir);
    if (!ok) {
        fprintf(stderr, "browser: %s: its folder does not exist\n", png_out);
        free(url);
        return false;
    }
    const char *base = strrchr(png_out, '/');
    char *shot = cp_t_fmt("--screenshot=%s/%s", abs_dir, base ? base + 1 : png_out);
    char *size = cp_t_fmt("--window-size=%d,%d", w, h);
    char *abs_png = cp_t_fmt("%s", shot + strlen("--screenshot="));
    unlink(abs_png);
    struct cp_run r;
    ok = run_browser(url, shot, size, &r, png_ok, abs_png);
    cp_run_release(&r);
    free(abs_png);
    free(size);
    free(shot);
    free(url);
    return ok;
}

bool ct_png_ink(const char *png_path, struct ct_png_ink *out)
{
    memset(out, 0, sizeof *out);
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, png_path)) {
        fprintf(stderr, "png: %s: %s\n", png_path, img.message);
        return false;
    }
    img.format = PNG_FORMAT_RGB;
    size_t npx = (size_t)img.width * img.height;
    unsigned char *px = malloc(npx ? npx * 3 : 1);
    if (!px || !png_image_finish_read(&img, NULL, px, 0, NULL)) {
        fprintf(stderr, "png: %s: %s\n", png_path, px ? img.message : "out of memory");
        free(px);
        png_image_free(&img);
        return false;
    }
    static const size_t BUCKETS = 4096;
    size_t *hist = calloc(BUCKETS, sizeof *hist);
    if (!hist) {
        free(px);
        return false;
    }
    for (size_t i = 0; i < npx; i++) {
        const unsigned char *p = px + 3 * i;
        hist[(size_t)(p[0] >> 4) << 8 | (size_t)(p[1] >> 4) << 4 | (size_t)(p[2] >> 4)]++;
    }
    size_t most = 0;
    for (size_t k = 0; k < BUCKETS; k++) {
        out->colors += hist[k] > 0;
        most = hist[k] > most ? hist[k] : most;
    }
    out->width = (int)img.width;
    out->height = (int)img.height;
    out->ink = npx ? 1.0 - (double)most / (double)npx : 0;
    free(hist);
    free(px);
    return true;
}
