/*
 * alloc.c - the one allocator every module of libxpjit goes through, with a
 * test hook that makes the N-th allocation fail (as Lua's tests do), so the
 * out-of-memory paths can be proven not to crash or leak.
 */
#include "ir_impl.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_ulong fail_countdown;

void xpj_alloc_fail_after(unsigned long n) { atomic_store(&fail_countdown, n); }

unsigned long xpj_alloc_fail_pending(void) {
  return atomic_load(&fail_countdown);
}

static bool should_fail(void) {
  unsigned long c = atomic_load(&fail_countdown);
  while (c != 0) {
    if (atomic_compare_exchange_weak(&fail_countdown, &c, c - 1))
      return c == 1;
  }
  return false;
}

void *xpj_malloc(size_t n) {
  if (should_fail())
    return NULL;
  return malloc(n ? n : 1);
}

void *xpj_calloc(size_t n, size_t size) {
  if (should_fail())
    return NULL;
  return calloc(n ? n : 1, size ? size : 1);
}

void *xpj_realloc(void *p, size_t n) {
  if (should_fail())
    return NULL;
  return realloc(p, n ? n : 1);
}

void xpj_free(void *p) { free(p); }

char *xpj_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = xpj_malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

bool xpj_grow(void **arr, uint32_t *cap, uint32_t need, size_t esize) {
  if (need <= *cap)
    return true;
  uint32_t ncap = *cap ? *cap : 8;
  while (ncap < need) {
    if (ncap > UINT32_MAX / 2)
      return false;
    ncap *= 2;
  }
  if ((size_t)ncap > SIZE_MAX / esize)
    return false;
  void *p = xpj_realloc(*arr, (size_t)ncap * esize);
  if (!p)
    return false;
  memset((char *)p + (size_t)*cap * esize, 0, (size_t)(ncap - *cap) * esize);
  *arr = p;
  *cap = ncap;
  return true;
}
