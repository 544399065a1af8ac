/* Test support: open a page in headless Chromium, as a person would, and
 * look at what its scripts made of it: the DOM after they ran, what they
 * printed to the console (errors included), a screenshot, and whether that
 * screenshot shows anything.
 *
 * Each call starts one browser (`timeout` around it, so a hung browser
 * cannot hang the test) with a fresh profile in the test's scratch folder
 * (cp_t_dir, or a folder of its own under /tmp outside a suite), removed
 * afterwards. Time in the page is virtual (--virtual-time-budget): the
 * scripts, their timers included, run to completion however loaded the
 * machine is, and the DOM is dumped after them. A browser that crashes or
 * prints nothing is started once more before the call gives up.
 *
 * The browser is /usr/bin/chromium (Debian's package, which scripts/test.sh
 * installs), or the program named by $CT_CHROMIUM. As everywhere in
 * tests/support, no Criterion: a helper that fails prints why (the command
 * line, its exit status, the end of its stderr) and returns NULL or false,
 * and the test asserts. A test that needs the browser asserts
 * ct_browser_available() rather than skipping without it. */
#ifndef CP_TEST_BROWSER_H
#define CP_TEST_BROWSER_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the browser is installed (an executable file). */
bool ct_browser_available(void);

/* Open file://FILE_PATH?QUERY (QUERY NULL or "": no query; FILE_PATH made
 * absolute when it is not) and return the serialized DOM after the page's
 * scripts ran (a heap string, caller frees), or NULL. OUT (may be NULL):
 * *console, a heap string with one line per console message of the page,
 * uncaught exceptions included, as Chromium logs them:
 *     "Uncaught Error: boom", source: file:///tmp/x.html (5)
 * ("" when the page printed nothing; NULL when the call failed). */
char *ct_browser_dom(const char *file_path, const char *query, char **console);

/* Open the page as ct_browser_dom does in a W x H window and write a PNG
 * screenshot of it to PNG_OUT. False when no PNG was written. */
bool ct_browser_screenshot(const char *file_path, const char *query, const char *png_out, int w,
                           int h);

/* What a PNG shows. */
struct ct_png_ink {
    int width, height;
    double ink;    /* the share of pixels not of the most common colour */
    size_t colors; /* distinct colours, at 4 bits a channel */
};

/* Read PNG_PATH (libpng) and measure it. False, after printing why, when
 * it cannot be read. A blank page has ink 0 and 1 colour. */
bool ct_png_ink(const char *png_path, struct ct_png_ink *out);

/* How many times `needle` occurs in `hay` (non-overlapping); 0 for NULL. */
size_t ct_count(const char *hay, const char *needle);

#endif
