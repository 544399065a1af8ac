/*
 * core/json: the one way cannprof writes JSON.
 *
 * Every JSON text cannprof produces — command output with --json, reports,
 * the metadata inside an .om, knowledge-base exports — is built as a
 * jansson tree and written by cp_json_dump, so it has one number format
 * and is valid JSON always:
 *
 *   - numbers: integers as integers; reals with 17 significant digits
 *     (jansson's lossless form: a reader gets back the very same double);
 *     NaN and infinities, which JSON cannot express, as null;
 *   - strings: valid UTF-8 always: bytes that do not form UTF-8 (a file
 *     name from another locale, a damaged model's node name) become U+FFFD;
 *   - objects keep their keys in the order they were set.
 *
 * The constructors return new references (NULL when out of memory, which
 * the setters pass on); the setters steal the value, like jansson's *_new
 * functions, and a NULL value leaves the container unchanged and returns
 * false.
 */
#ifndef CP_CORE_JSON_H
#define CP_CORE_JSON_H

#include "core/core.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A real, or null when v is NaN or infinite. */
json_t *cp_json_num(double v);
/* An integer. */
json_t *cp_json_int(int64_t v);
/* A string; NULL s gives null. Invalid UTF-8 is repaired (U+FFFD). */
json_t *cp_json_str(const char *s);
/* The same for n bytes that need no NUL. */
json_t *cp_json_strn(const char *s, size_t n);
/* A boolean. */
json_t *cp_json_bool(bool v);

/* obj[key] = v (v stolen; the key repaired like a string). false when v is
 * NULL or out of memory. */
bool cp_json_set(json_t *obj, const char *key, json_t *v);
/* Shorthands: obj[key] = number / integer / string / boolean. */
bool cp_json_set_num(json_t *obj, const char *key, double v);
bool cp_json_set_int(json_t *obj, const char *key, int64_t v);
bool cp_json_set_str(json_t *obj, const char *key, const char *s);
bool cp_json_set_bool(json_t *obj, const char *key, bool v);
/* arr += v (v stolen). false when v is NULL or out of memory. */
bool cp_json_push(json_t *arr, json_t *v);

/* Whether s[0..n) is valid UTF-8 (no overlong forms, no surrogates, at
 * most U+10FFFF). */
bool cp_utf8_valid(const char *s, size_t n);
/* Append s[0..n) to out with every invalid sequence replaced by U+FFFD. */
void cp_utf8_repair(const char *s, size_t n, struct cp_buf *out);

/* Write j as JSON text, appended to out: compact, or indented by 2 when
 * `pretty`. CP_ERR_NOMEM when the text cannot be built. */
enum cp_status cp_json_dump(const json_t *j, bool pretty, struct cp_buf *out);
/* Write j to f, compact, on one line. CP_ERR_IO when f
 * refuses the write (a full disk, a closed pipe). */
enum cp_status cp_json_print(const json_t *j, FILE *f);
/* Write j to `path` atomically (indented by 2, a newline at the end). */
enum cp_status cp_json_write_file(const json_t *j, const char *path, struct cp_diag *d);

/* j as compact JSON text in a new heap string (the caller frees), for the
 * places that keep JSON as text (a finding's node list, a stored tuning
 * point). NULL when j is NULL or out of memory. */
char *cp_json_text(const json_t *j);

/* The value a stored JSON text holds (a config, a histogram kept in a
 * database), to put inside a larger document: parsed when `text` is JSON,
 * else the text itself as a string (repaired like any string), null when
 * `text` is NULL. A new reference; NULL only when out of memory. */
json_t *cp_json_embed(const char *text);

#endif
