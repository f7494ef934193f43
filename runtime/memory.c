/* memory.c - device, host and shared allocations. Every allocation is
 * recorded (sorted by address) so that frees are checked and launches can
 * check that an array view lies inside the memory it points into. */
#include "rt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* index of the first allocation with base > p */
static size_t upper(const xpj_device *d, uintptr_t p) {
  size_t lo = 0, hi = d->nallocs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (d->allocs[mid].base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static bool overlap(const rt_alloc *x, const rt_alloc *y) {
  return x->base <= y->base + (y->bytes - 1) &&
         y->base <= x->base + (x->bytes - 1);
}

/* Enters a into dev's table: XPJ_ERR_INVALID when it overlaps an
 * allocation there (only an import can: the backends' allocations do not
 * overlap), or one freed and still used by commands. */
static xpj_status record(xpj_device *dev, rt_alloc a, const char *what) {
  pthread_mutex_lock(&dev->mem_lock);
  size_t i = upper(dev, a.base);
  const rt_alloc *clash = NULL;
  if (i > 0 && overlap(&dev->allocs[i - 1], &a))
    clash = &dev->allocs[i - 1];
  else if (i < dev->nallocs && overlap(&dev->allocs[i], &a))
    clash = &dev->allocs[i];
  bool retired = false;
  for (size_t r = 0; r < dev->nretired && !clash; r++)
    if (overlap(&dev->retired[r], &a)) {
      clash = &dev->retired[r];
      retired = true;
    }
  if (clash) {
    rt_alloc c = *clash;
    pthread_mutex_unlock(&dev->mem_lock);
    /* one freed already waits for its commands: freeing it again is not
     * what the caller can do about it */
    return rt_err(XPJ_ERR_INVALID,
                  "%s: %zu bytes at %p overlap the %zu-byte allocation at "
                  "%p of %s%s",
                  what, a.bytes, (void *)a.base, c.bytes, (void *)c.base,
                  dev->id,
                  retired ? ", which was freed (xpj_mem_free) and waits for "
                            "the commands that use it (wait for them first)"
                  : c.imported ? " (imported: xpj_mem_import; memory its "
                                 "owner has freed must be let go with "
                                 "xpj_mem_free)"
                               : "");
  }
  if (dev->nallocs == dev->cap) {
    size_t cap = dev->cap ? dev->cap * 2 : 64;
    rt_alloc *n = realloc(dev->allocs, cap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&dev->mem_lock);
      return rt_err(XPJ_ERR_NOMEM, "out of memory");
    }
    dev->allocs = n;
    dev->cap = cap;
  }
  memmove(&dev->allocs[i + 1], &dev->allocs[i],
          (dev->nallocs - i) * sizeof *dev->allocs);
  dev->allocs[i] = a;
  dev->nallocs++;
  pthread_mutex_unlock(&dev->mem_lock);
  return XPJ_OK;
}

xpj_status xpj_mem_alloc(xpj_device *dev, xpj_mem_kind kind, size_t bytes,
                         size_t align, void **out) {
  if (!out)
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_alloc: out is NULL");
  *out = NULL;
  if (!dev)
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_alloc: device is NULL");
  if (rt_inherited(dev->ctx))
    return rt_err_inherited("xpj_mem_alloc", "device");
  if (kind != XPJ_MEM_DEVICE && kind != XPJ_MEM_HOST && kind != XPJ_MEM_SHARED)
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_alloc: unknown memory kind %d",
                  (int)kind);
  if (bytes == 0)
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_alloc: size is 0");
  if (bytes > dev->info.global_mem_size)
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_mem_alloc: %zu bytes is more than the %llu bytes of "
                  "memory of %s",
                  bytes, (unsigned long long)dev->info.global_mem_size,
                  dev->id);
  if (align == 0)
    align = dev->info.mem_base_align > 64 ? dev->info.mem_base_align : 64;
  if ((align & (align - 1)) || align > ((size_t)1 << 30))
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_mem_alloc: alignment %zu is not a power of two up to "
                  "1 GiB",
                  align);
  void *p = NULL;
  xpj_status st = dev->ops->mem_alloc(dev, kind, bytes, align, &p);
  if (st != XPJ_OK)
    return st;
  st = record(dev, (rt_alloc){(uintptr_t)p, bytes, kind, 0, false},
               "xpj_mem_alloc");
  if (st != XPJ_OK) {
    dev->ops->mem_free(dev, kind, p);
    return st;
  }
  *out = p;
  return XPJ_OK;
}

xpj_status xpj_mem_import(xpj_device *dev, void *ptr, size_t bytes,
                          xpj_mem_kind kind) {
  if (!dev)
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_import: device is NULL");
  if (rt_inherited(dev->ctx))
    return rt_err_inherited("xpj_mem_import", "device");
  if (!ptr)
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_import: pointer is NULL");
  if (kind != XPJ_MEM_DEVICE && kind != XPJ_MEM_HOST && kind != XPJ_MEM_SHARED)
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_import: unknown memory kind %d",
                  (int)kind);
  if (bytes == 0)
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_import: size is 0");
  if (bytes - 1 > UINTPTR_MAX - (uintptr_t)ptr)
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_mem_import: %zu bytes at %p run past the end of the "
                  "address space", bytes, ptr);
  return record(dev, (rt_alloc){(uintptr_t)ptr, bytes, kind, 0, true},
                "xpj_mem_import");
}

xpj_status xpj_device_wait_native(xpj_device *dev, uintptr_t queue) {
  if (!dev)
    return rt_err(XPJ_ERR_INVALID, "xpj_device_wait_native: device is NULL");
  if (rt_inherited(dev->ctx))
    return rt_err_inherited("xpj_device_wait_native", "device");
  if (!dev->ops->wait_native)
    return rt_err(XPJ_ERR_UNSUPPORTED,
                  "xpj_device_wait_native: %s has no native queues xpjit can "
                  "wait for", dev->id);
  return dev->ops->wait_native(dev, queue);
}

/* An allocation still used by commands leaves the table (no new command
 * may use it) for the retired list, and goes back to the backend when the
 * last command using it finishes (rt_mem_release). */
xpj_status xpj_mem_free(xpj_device *dev, void *ptr) {
  if (!ptr)
    return XPJ_OK;
  if (!dev)
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_free: device is NULL");
  if (rt_inherited(dev->ctx)) /* nothing freed: the parent's memory */
    return rt_err_inherited("xpj_mem_free", "device");
  pthread_mutex_lock(&dev->mem_lock);
  size_t i = upper(dev, (uintptr_t)ptr);
  if (i == 0 || dev->allocs[i - 1].base != (uintptr_t)ptr) {
    bool inside = i && (uintptr_t)ptr - dev->allocs[i - 1].base <
                           dev->allocs[i - 1].bytes;
    uintptr_t base = inside ? dev->allocs[i - 1].base : 0;
    pthread_mutex_unlock(&dev->mem_lock);
    if (inside)
      return rt_err(XPJ_ERR_INVALID, "xpj_mem_free: %p is inside the "
                    "allocation at %p of %s, not its start: nothing freed",
                    ptr, (void *)base, dev->id);
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_free: %p is no allocation of %s "
                  "(freed already, another device's, or not from "
                  "xpj_mem_alloc): nothing freed", ptr, dev->id);
  }
  rt_alloc a = dev->allocs[i - 1];
  if (a.uses && dev->nretired == dev->cap_retired) {
    size_t cap = dev->cap_retired ? dev->cap_retired * 2 : 16;
    rt_alloc *r = realloc(dev->retired, cap * sizeof *r);
    if (!r) {
      pthread_mutex_unlock(&dev->mem_lock);
      return rt_err(XPJ_ERR_NOMEM, "xpj_mem_free: out of memory");
    }
    dev->retired = r;
    dev->cap_retired = cap;
  }
  memmove(&dev->allocs[i - 1], &dev->allocs[i],
          (dev->nallocs - i) * sizeof *dev->allocs);
  dev->nallocs--;
  if (a.uses)
    dev->retired[dev->nretired++] = a;
  pthread_mutex_unlock(&dev->mem_lock);
  if (!a.uses && !a.imported)
    dev->ops->mem_free(dev, a.kind, ptr);
  return XPJ_OK;
}

static bool find_locked(xpj_device *dev, const void *p, size_t *at) {
  size_t i = upper(dev, (uintptr_t)p);
  if (i == 0 || (uintptr_t)p - dev->allocs[i - 1].base >=
                    dev->allocs[i - 1].bytes)
    return false;
  *at = i - 1;
  return true;
}

bool rt_mem_find(xpj_device *dev, const void *p, rt_alloc *out) {
  pthread_mutex_lock(&dev->mem_lock);
  size_t i;
  bool found = find_locked(dev, p, &i);
  if (found)
    *out = dev->allocs[i];
  pthread_mutex_unlock(&dev->mem_lock);
  return found;
}

bool rt_mem_hold(xpj_device *dev, const void *p, rt_alloc *out) {
  pthread_mutex_lock(&dev->mem_lock);
  size_t i;
  bool found = find_locked(dev, p, &i);
  if (found) {
    dev->allocs[i].uses++;
    *out = dev->allocs[i];
  }
  pthread_mutex_unlock(&dev->mem_lock);
  return found;
}

void rt_mem_release(xpj_device *dev, uintptr_t base) {
  pthread_mutex_lock(&dev->mem_lock);
  size_t i;
  if (find_locked(dev, (const void *)base, &i) && dev->allocs[i].base == base) {
    dev->allocs[i].uses--;
    pthread_mutex_unlock(&dev->mem_lock);
    return;
  }
  for (i = 0; i < dev->nretired; i++)
    if (dev->retired[i].base == base)
      break;
  rt_alloc a = {0};
  bool gone = false;
  if (i < dev->nretired && --dev->retired[i].uses == 0) {
    a = dev->retired[i];
    dev->retired[i] = dev->retired[--dev->nretired];
    gone = true;
  }
  pthread_mutex_unlock(&dev->mem_lock);
  if (gone && !a.imported)
    dev->ops->mem_free(dev, a.kind, (void *)a.base);
}

xpj_status rt_mem_check_retired(xpj_device *dev, const void *p,
                                const char *what) {
  pthread_mutex_lock(&dev->mem_lock);
  bool retired = false;
  for (size_t i = 0; i < dev->nretired && !retired; i++)
    retired = (uintptr_t)p - dev->retired[i].base < dev->retired[i].bytes;
  pthread_mutex_unlock(&dev->mem_lock);
  return retired ? rt_err(XPJ_ERR_INVALID,
                          "%s: %p is in memory of %s that was freed "
                          "(xpj_mem_free; it goes back when the commands "
                          "that use it finish)",
                          what, p, dev->id)
                 : XPJ_OK;
}

void rt_mem_free_all(xpj_device *dev) {
  for (size_t i = 0; i < dev->nallocs; i++)
    if (!dev->allocs[i].imported)
      dev->ops->mem_free(dev, dev->allocs[i].kind,
                         (void *)dev->allocs[i].base);
  for (size_t i = 0; i < dev->nretired; i++)
    if (!dev->retired[i].imported)
      dev->ops->mem_free(dev, dev->retired[i].kind,
                         (void *)dev->retired[i].base);
  dev->nallocs = dev->nretired = 0;
  free(dev->allocs);
  free(dev->retired);
  dev->allocs = dev->retired = NULL;
}

xpj_status xpj_mem_query(xpj_device *dev, const void *ptr, void **base,
                         size_t *bytes, xpj_mem_kind *kind) {
  if (!dev)
    return rt_err(XPJ_ERR_INVALID, "xpj_mem_query: device is NULL");
  if (rt_inherited(dev->ctx))
    return rt_err_inherited("xpj_mem_query", "device");
  rt_alloc a;
  if (!ptr || !rt_mem_find(dev, ptr, &a))
    return rt_err(XPJ_ERR_NOT_FOUND, "%p is not in any allocation of %s", ptr,
                  dev->id);
  if (base)
    *base = (void *)a.base;
  if (bytes)
    *bytes = a.bytes;
  if (kind)
    *kind = a.kind;
  return XPJ_OK;
}

xpj_device *rt_mem_entered(xpj_device *dev, const void *p, size_t bytes) {
  for (unsigned i = 0; i < dev->ctx->nall; i++) {
    xpj_device *o = dev->ctx->all[i];
    pthread_mutex_lock(&o->mem_lock);
    size_t k = upper(o, (uintptr_t)p);
    bool in = k < o->nallocs && o->allocs[k].base - (uintptr_t)p < bytes;
    for (size_t r = 0; r < o->nretired && !in; r++)
      in = o->retired[r].base > (uintptr_t)p &&
           o->retired[r].base - (uintptr_t)p < bytes;
    pthread_mutex_unlock(&o->mem_lock);
    if (in)
      return o;
  }
  return NULL;
}

xpj_device *rt_mem_other_device(xpj_device *dev, const void *p) {
  rt_alloc a;
  for (unsigned i = 0; i < dev->ctx->nall; i++) {
    xpj_device *o = dev->ctx->all[i];
    if (o != dev && rt_mem_find(o, p, &a) && a.kind == XPJ_MEM_DEVICE)
      return o;
  }
  return NULL;
}
