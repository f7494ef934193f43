/* filter.c - device filter strings, after ONEAPI_DEVICE_SELECTOR:
 *   filter := term (';' term)*
 *   term   := ['!'] backend [':' item (',' item)*]  |  ['!'] type
 *   backend:= cpu | native_cpu | cuda | level_zero | opencl | '*'
 *   item   := '*' | INDEX | cpu | gpu | acc | fpga
 * A device is selected when it matches some positive term (or there are
 * none) and no negative term. */
#include "rt.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TERMS 32
#define MAX_ITEMS 16

typedef struct item {
  int kind; /* 0 any, 1 index, 2 type */
  unsigned value;
} item;

typedef struct term {
  bool negate;
  int backend; /* -1: any */
  unsigned nitems;
  item items[MAX_ITEMS];
} term;

struct rt_filter {
  unsigned nterms;
  term terms[MAX_TERMS];
};

static const struct {
  const char *name;
  int backend;
} backends[] = {
    {"cpu", XPJ_BACKEND_CPU},       {"native_cpu", XPJ_BACKEND_CPU},
    {"cuda", XPJ_BACKEND_CUDA},     {"level_zero", XPJ_BACKEND_LEVEL_ZERO},
    {"opencl", XPJ_BACKEND_OPENCL}, {"*", -1},
};

static int type_of(const char *s, size_t n) {
  if (n == 3 && !memcmp(s, "cpu", 3))
    return XPJ_DEVICE_CPU;
  if (n == 3 && !memcmp(s, "gpu", 3))
    return XPJ_DEVICE_GPU;
  if ((n == 3 && !memcmp(s, "acc", 3)) || (n == 4 && !memcmp(s, "fpga", 4)))
    return XPJ_DEVICE_ACCELERATOR;
  return -1;
}

static xpj_status bad(const char *filter, const char *why, const char *at,
                      size_t n) {
  return rt_err(XPJ_ERR_INVALID,
                "device filter \"%s\": %s \"%.*s\" (expected terms like "
                "cpu, cuda:0, level_zero:gpu, opencl:cpu, *:gpu, !cuda:1)",
                filter, why, (int)n, at);
}

static xpj_status parse_term(const char *filter, const char *s, size_t n,
                             term *t) {
  memset(t, 0, sizeof *t);
  if (n && *s == '!') {
    t->negate = true;
    s++;
    n--;
  }
  const char *colon = memchr(s, ':', n);
  size_t bn = colon ? (size_t)(colon - s) : n;
  t->backend = -2;
  for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
    if (strlen(backends[i].name) == bn && !memcmp(backends[i].name, s, bn))
      t->backend = backends[i].backend;
  if (t->backend == -2) {
    int ty = type_of(s, bn);
    if (ty < 0 || colon)
      return bad(filter, "unknown backend", s, bn);
    t->backend = -1; /* "gpu": any backend, that type */
    t->nitems = 1;
    t->items[0] = (item){2, (unsigned)ty};
    return XPJ_OK;
  }
  if (!colon) {
    t->nitems = 1;
    t->items[0] = (item){0, 0};
    return XPJ_OK;
  }
  const char *p = colon + 1, *end = s + n;
  if (p == end)
    return bad(filter, "no devices after ':' in", s, n);
  while (p <= end) {
    const char *q = p;
    while (q < end && *q != ',')
      q++;
    size_t in = (size_t)(q - p);
    if (t->nitems == MAX_ITEMS)
      return bad(filter, "too many devices in", s, n);
    item *it = &t->items[t->nitems++];
    if (in == 1 && *p == '*') {
      *it = (item){0, 0};
    } else if (in > 0 && in < 10 && isdigit((unsigned char)*p)) {
      unsigned v = 0;
      for (size_t i = 0; i < in; i++) {
        if (!isdigit((unsigned char)p[i]))
          return bad(filter, "bad device index", p, in);
        v = v * 10 + (unsigned)(p[i] - '0');
      }
      *it = (item){1, v};
    } else {
      int ty = type_of(p, in);
      if (ty < 0)
        return bad(filter, in ? "unknown device" : "empty device in", in ? p : s,
                   in ? in : n);
      *it = (item){2, (unsigned)ty};
    }
    p = q + 1;
  }
  return XPJ_OK;
}

xpj_status rt_filter_parse(const char *s, rt_filter **out) {
  *out = NULL;
  rt_filter *f = calloc(1, sizeof *f);
  if (!f)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  size_t len = strlen(s);
  const char *p = s, *end = s + len;
  while (p <= end) {
    const char *q = p;
    while (q < end && *q != ';')
      q++;
    size_t n = (size_t)(q - p);
    if (n == 0) {
      free(f);
      return bad(s, "empty term", p, 0);
    }
    for (size_t i = 0; i < n; i++)
      if (isspace((unsigned char)p[i]) || !isprint((unsigned char)p[i])) {
        free(f);
        return bad(s, "unexpected character in", p, n);
      }
    if (f->nterms == MAX_TERMS) {
      free(f);
      return bad(s, "too many terms at", p, n);
    }
    xpj_status st = parse_term(s, p, n, &f->terms[f->nterms++]);
    if (st != XPJ_OK) {
      free(f);
      return st;
    }
    p = q + 1;
  }
  *out = f;
  return XPJ_OK;
}

static bool term_match(const term *t, const xpj_device *d) {
  if (t->backend >= 0 && (xpj_backend)t->backend != d->info.backend)
    return false;
  for (unsigned i = 0; i < t->nitems; i++) {
    const item *it = &t->items[i];
    if (it->kind == 0 || (it->kind == 1 && it->value == d->info.index) ||
        (it->kind == 2 && it->value == (unsigned)d->info.type))
      return true;
  }
  return false;
}

bool rt_filter_match(const rt_filter *f, const xpj_device *d) {
  bool any_positive = false, pos = false;
  for (unsigned i = 0; i < f->nterms; i++) {
    const term *t = &f->terms[i];
    if (t->negate) {
      if (term_match(t, d))
        return false;
    } else {
      any_positive = true;
      pos = pos || term_match(t, d);
    }
  }
  return pos || !any_positive;
}

bool rt_filter_may_use(const rt_filter *f, xpj_backend b) {
  bool any_positive = false;
  for (unsigned i = 0; i < f->nterms; i++) {
    const term *t = &f->terms[i];
    if (t->negate)
      continue;
    any_positive = true;
    if (t->backend < 0 || t->backend == (int)b)
      return true;
  }
  return !any_positive;
}

void rt_filter_free(rt_filter *f) { free(f); }
