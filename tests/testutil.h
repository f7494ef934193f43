/* testutil.h - helpers shared by the unit tests (cmocka). */
#ifndef XPJ_TESTUTIL_H
#define XPJ_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xpjit_compiler.h"
#include "xpjit_ir.h"

/* Whether this process has the file at path open (/proc/self/fd): a
 * cache file SQLite opened. */
static inline bool file_open_here(const char *path) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *de;
  char link[512], target[512];
  bool found = false;
  while (d && (de = readdir(d))) {
    snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) {
      target[n] = 0;
      found = found || !strcmp(target, path);
    }
  }
  if (d)
    closedir(d);
  return found;
}

/* The aliases (names "a" and 64 hex digits) in the hit-file directory of
 * the cache file db (docs/cache.md, "Hit files"). */
static inline unsigned aliases_of(const char *db) {
  char dir[600];
  snprintf(dir, sizeof dir, "%s.hits", db);
  DIR *d = opendir(dir);
  unsigned n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    n += e->d_name[0] == 'a' && strlen(e->d_name) == 65;
  if (d)
    closedir(d);
  return n;
}

/* Parses src as "t.xpk"; returns the status; *out gets the module (always
 * created) and *text the rendered diagnostics (malloc'd). */
static inline xpj_status parse_src(const char *src, xpj_module **out,
                                   char **text) {
  xpj_module *m = NULL;
  xpj_diags *d = NULL;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  xpj_status st = xpj_parse(m, "t.xpk", src, strlen(src), d);
  char *r = NULL;
  assert_int_equal(xpj_diags_render(d, &r, NULL), XPJ_OK);
  xpj_diags_destroy(d);
  if (text)
    *text = r;
  else
    free(r);
  if (out)
    *out = m;
  else
    xpj_module_destroy(m);
  return st;
}

/* Specialises kernel of src with every type parameter bound to type and
 * the given ndim; returns the status and the hash in hex (if ok). */
static inline xpj_status spec_hash(const char *src, const char *kernel,
                                   const char *tnames, xpj_scalar type,
                                   unsigned ndim, char hex[65], char **diag) {
  xpj_module *m = NULL, *s = NULL;
  xpj_status st = parse_src(src, &m, NULL);
  if (st != XPJ_OK) {
    xpj_module_destroy(m);
    return st;
  }
  const char *names[8];
  xpj_scalar types[8];
  unsigned n = 0;
  char buf[64];
  strncpy(buf, tnames ? tnames : "", sizeof buf - 1);
  buf[sizeof buf - 1] = 0;
  for (char *tok = strtok(buf, ","); tok && n < 8; tok = strtok(NULL, ",")) {
    names[n] = tok;
    types[n++] = type;
  }
  xpj_spec sp = {n, names, types, ndim, 0, NULL, NULL};
  xpj_diags *d = NULL;
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  st = xpj_specialize(m, kernel, &sp, &s, d);
  if (st == XPJ_OK && hex)
    assert_int_equal(xpj_module_hash(s, kernel, NULL, hex), XPJ_OK);
  if (diag)
    assert_int_equal(xpj_diags_render(d, diag, NULL), XPJ_OK);
  xpj_diags_destroy(d);
  xpj_module_destroy(s);
  xpj_module_destroy(m);
  return st;
}

#endif
