/* launch.c - launches: the geometry and every argument checked against the
 * kernel's signature, then flattened to the ABI (docs/abi.md) in one block
 * that the queued command owns. */
#include "rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static unsigned scalar_bytes(xpj_scalar s) {
  unsigned b = xpj_scalar_bits(s);
  return b <= 8 ? 1 : b / 8;
}

static xpj_status launch_err(const xpj_kernel *k, const char *fmt,
                             const char *detail) {
  return rt_err(XPJ_ERR_INVALID, "launch of %s: %s%s",
                rt_kernel_signature(k), fmt, detail ? detail : "");
}

/* The hardware dimension (0 fastest: the CPU's innermost work-item loop,
 * CUDA x, OpenCL 0) of logical dimension d of k's launches: the kernel's
 * id rank R reversed, the dimensions past it in place (docs/abi.md,
 * "Dimension order"); the compiler lays out ids the same way. */
static unsigned hw_dim(const xpj_kernel *k, unsigned d) {
  unsigned rank = k->desc.id_rank ? k->desc.id_rank : 1;
  return d < rank ? rank - 1 - d : d;
}

/* The same, for xpj_kernel_suggest_local (suggest) or a launch. */
static xpj_status geometry_err(const xpj_kernel *k, bool suggest,
                               const char *fmt, const char *detail) {
  if (!suggest)
    return launch_err(k, fmt, detail);
  return rt_err(XPJ_ERR_INVALID, "xpj_kernel_suggest_local for %s: %s%s",
                rt_kernel_signature(k), fmt, detail ? detail : "");
}

/* What a launch and xpj_kernel_suggest_local refuse of a global size:
 * ndim out of 1..3 or not the kernel's, a size of 0, more than the device
 * takes in a dimension, or more than 2^62 work-items in all. */
static xpj_status check_global(const xpj_kernel *k, bool suggest,
                               unsigned ndim, const uint64_t *global) {
  const xpj_device_info *di = &k->dev->info;
  char buf[256];
  if (ndim < 1 || ndim > 3) {
    snprintf(buf, sizeof buf, "%u", ndim);
    return geometry_err(k, suggest, "the range has ndim ", buf);
  }
  if (k->desc.dims && ndim != k->desc.dims) {
    snprintf(buf, sizeof buf, "%u-dimensional, but the kernel is declared "
             "with %u dimension%s", ndim, k->desc.dims,
             k->desc.dims > 1 ? "s" : "");
    return geometry_err(k, suggest, "the range is ", buf);
  }
  uint64_t total = 1;
  for (unsigned d = 0; d < ndim; d++) {
    if (global[d] == 0) {
      snprintf(buf, sizeof buf, "%u", d);
      return geometry_err(k, suggest, "the global size is 0 in dimension ",
                          buf);
    }
    if (global[d] > di->max_global_size[hw_dim(k, d)]) {
      snprintf(buf, sizeof buf, "%llu in dimension %u is more than the "
               "device takes there (%llu)",
               (unsigned long long)global[d], d,
               (unsigned long long)di->max_global_size[hw_dim(k, d)]);
      return geometry_err(k, suggest, "the global size ", buf);
    }
    if (global[d] > XPJ_MAX_EXTENT / total) {
      /* no one dimension is at fault: name the whole product */
      int n = snprintf(buf, sizeof buf, "%llu", (unsigned long long)global[0]);
      for (unsigned e = 1; e < ndim && n > 0 && (size_t)n < sizeof buf; e++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " x %llu",
                      (unsigned long long)global[e]);
      if (n > 0 && (size_t)n < sizeof buf)
        snprintf(buf + n, sizeof buf - (size_t)n, " work-items is more than "
                 "2^62 in all");
      return geometry_err(k, suggest, "the global size ", buf);
    }
    total *= global[d];
  }
  return XPJ_OK;
}

/* Largest divisor of n that is <= cap. */
static uint64_t divisor_upto(uint64_t n, uint64_t cap) {
  if (cap >= n)
    return n;
  for (uint64_t d = cap; d > 1; d--)
    if (n % d == 0)
      return d;
  return 1;
}

static uint64_t kernel_max_wg(const xpj_kernel *k) {
  return k->dev->info.max_work_group_size;
}

/* "16 x 16" */
static void size_str(char *buf, size_t n, const uint64_t *s, unsigned ndim) {
  int k = 0;
  for (unsigned d = 0; d < ndim && k >= 0 && (size_t)k < n; d++)
    k += snprintf(buf + k, n - (size_t)k, "%s%llu", d ? " x " : "",
                  (unsigned long long)s[d]);
}

xpj_status rt_check_reqd_local(const xpj_kernel *k) {
  if (!k->desc.reqd_local[0])
    return XPJ_OK;
  const xpj_device_info *di = &k->dev->info;
  uint64_t total = 1;
  bool fits = true;
  for (unsigned d = 0; d < k->desc.dims; d++) {
    total *= k->desc.reqd_local[d];
    fits &= k->desc.reqd_local[d] <= di->max_work_item_sizes[hw_dim(k, d)];
  }
  if (fits && total <= kernel_max_wg(k))
    return XPJ_OK;
  char want[64];
  size_str(want, sizeof want, k->desc.reqd_local, k->desc.dims);
  return rt_err(XPJ_ERR_UNSUPPORTED, "kernel %s requires work-groups of %s "
                "(%llu work-items); %s takes at most %llu (%llu x %llu x %llu)",
                k->name, want, (unsigned long long)total, di->name,
                (unsigned long long)kernel_max_wg(k),
                (unsigned long long)di->max_work_item_sizes[0],
                (unsigned long long)di->max_work_item_sizes[1],
                (unsigned long long)di->max_work_item_sizes[2]);
}

/* The runtime's own choice for a kernel whose static arrays do not limit
 * it: a few hundred work-items, enough to amortise a group on the CPU and
 * to fill a GPU's SIMD units, within every device's limits; the fastest
 * dimension first, so a group walks contiguous memory. */
static void plain_local(const xpj_kernel *k, unsigned ndim,
                        const uint64_t *global, uint64_t *local) {
  uint64_t budget = 256;
  if (budget > kernel_max_wg(k))
    budget = kernel_max_wg(k);
  for (unsigned d = 0; d < ndim; d++)
    local[d] = 1;
  for (unsigned h = 0; h < 3; h++) {
    unsigned d = hw_dim(k, h); /* the mapping is its own inverse */
    if (d >= ndim)
      continue;
    uint64_t cap = budget;
    if (cap > k->dev->info.max_work_item_sizes[h])
      cap = k->dev->info.max_work_item_sizes[h];
    local[d] = global[d] ? divisor_upto(global[d], cap ? cap : 1) : 1;
    budget /= local[d];
    if (budget == 0)
      budget = 1;
  }
}

static xpj_status fit(const xpj_kernel *k, unsigned ndim,
                      const uint64_t *global, const uint64_t *local,
                      xpj_fit *out) {
  if (xpj_func_local_fit(k->fit_f, ndim, global, local, out) != XPJ_OK)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  return XPJ_OK;
}

/* The choice for an nd-range kernel without a required size. One that
 * indexes static arrays by its local ids (or anything else that depends on
 * the group's shape) gets, in each dimension, the fastest first, the
 * largest size that divides the global size and keeps every such index in
 * its array (xpj_func_local_fit): a tile written for 16 x 16 groups gets
 * 16 x 16. The search starts from groups of one work-item; when those are
 * not proved safe it goes on all the same, since an index that shrinks as
 * the group grows (t[group_id(0)]: fewer groups) may fit larger groups
 * only, and the runtime refuses to choose (naming what groups of one do)
 * when no size it tries fits; other kernels get plain_local. */
static xpj_status fitted_local(const xpj_kernel *k, unsigned ndim,
                               const uint64_t *global, uint64_t *local) {
  const xpj_device_info *di = &k->dev->info;
  xpj_fit f, one;
  for (unsigned d = 0; d < ndim; d++)
    local[d] = 1;
  xpj_status st = fit(k, ndim, global, local, &f);
  if (st != XPJ_OK)
    return st;
  if (f.fits && !f.shape_indices) { /* its arrays do not limit it */
    plain_local(k, ndim, global, local);
    return XPJ_OK;
  }
  if (!f.fits && !strcmp(f.array, "?")) {
    const char *file = xpj_module_file_name(k->sm, f.loc.file);
    return rt_err(XPJ_ERR_INVALID, "launch of %s: the runtime cannot choose "
                  "a local size: it cannot follow the kernel's indices into "
                  "static arrays (at %s%s%u:%u: calls nested too deep or too "
                  "many, or values with no fixed point); give a local size, "
                  "or declare the one the kernel is written for with "
                  "local(...)", rt_kernel_signature(k), file ? file : "",
                  file ? ":" : "line ", f.loc.line, f.loc.col);
  }
  one = f;
  bool fits = f.fits;
  /* at most 1024 work-items, the ceiling of most GPUs: a tile larger than
   * 32 x 32 should declare its size. Intel's OpenCL CPU runtime (2026.22)
   * reports 8192 but silently runs nothing of a kernel with barriers in
   * loops in groups over 1024 (tests/conformance transpose_tiled) */
  uint64_t budget = kernel_max_wg(k) < 1024 ? kernel_max_wg(k) : 1024;
  for (unsigned h = 0; h < 3; h++) {
    unsigned d = hw_dim(k, h);
    if (d >= ndim)
      continue;
    uint64_t rest = 1;
    for (unsigned e = 0; e < ndim; e++)
      rest *= e == d ? 1 : local[e];
    uint64_t cap = budget / rest;
    if (cap > di->max_work_item_sizes[h])
      cap = di->max_work_item_sizes[h];
    if (cap > global[d])
      cap = global[d];
    for (uint64_t v = cap; v > 1; v--) {
      if (global[d] % v)
        continue;
      local[d] = v;
      if ((st = fit(k, ndim, global, local, &f)) != XPJ_OK)
        return st;
      if (f.fits) {
        fits = true;
        break;
      }
      local[d] = 1;
    }
  }
  if (!fits) {
    const char *file = xpj_module_file_name(k->sm, one.loc.file);
    return rt_err(XPJ_ERR_INVALID, "launch of %s: the runtime cannot choose "
                  "a local size: index %u of %s array '%s' at %s%s%u:%u "
                  "may take %lld..%lld (its extent is %lld) in groups of one "
                  "work-item, and no larger size the runtime tried (those "
                  "that divide the global size, up to 1024 work-items) "
                  "keeps it in; give a local size, or declare the one the "
                  "kernel is written for with local(...)",
                  rt_kernel_signature(k), one.index, "static", one.array,
                  file ? file : "", file ? ":" : "line ", one.loc.line,
                  one.loc.col, (long long)one.lo, (long long)one.hi,
                  (long long)one.extent);
  }
  return XPJ_OK;
}

/* fitted_local, remembered per global size (refusals are not: they are
 * errors, and their message is made again). */
static xpj_status memo_local(const xpj_kernel *k, unsigned ndim,
                             const uint64_t *global, uint64_t *local) {
  xpj_kernel *mk = (xpj_kernel *)k; /* the memo is a cache, not state */
  pthread_mutex_lock(&mk->fit_mu);
  for (unsigned i = 0; i < 4; i++) {
    if (mk->fit_memo[i].ndim != ndim ||
        memcmp(mk->fit_memo[i].global, global, ndim * sizeof *global))
      continue;
    memcpy(local, mk->fit_memo[i].local, ndim * sizeof *local);
    pthread_mutex_unlock(&mk->fit_mu);
    return XPJ_OK;
  }
  pthread_mutex_unlock(&mk->fit_mu);
  xpj_status st = fitted_local(k, ndim, global, local);
  if (st != XPJ_OK)
    return st;
  pthread_mutex_lock(&mk->fit_mu);
  unsigned i = mk->fit_next++ % 4;
  mk->fit_memo[i].ndim = ndim;
  memcpy(mk->fit_memo[i].global, global, ndim * sizeof *global);
  memcpy(mk->fit_memo[i].local, local, ndim * sizeof *local);
  pthread_mutex_unlock(&mk->fit_mu);
  return XPJ_OK;
}

xpj_status xpj_kernel_suggest_local(const xpj_kernel *k, unsigned ndim,
                                    const uint64_t *global, uint64_t *local) {
  if (!k || !global || !local)
    return rt_err(XPJ_ERR_INVALID, "xpj_kernel_suggest_local: %s is NULL",
                  !k ? "the kernel" : !global ? "global" : "local");
  if (rt_inherited(k->dev->ctx))
    return rt_err_inherited("xpj_kernel_suggest_local", "kernel");
  xpj_status st = check_global(k, true, ndim, global); /* as xpj_launch */
  if (st != XPJ_OK)
    return st;
  if (k->desc.reqd_local[0]) { /* the one size there is, if it divides */
    for (unsigned d = 0; d < ndim; d++)
      if (global[d] % k->desc.reqd_local[d]) {
        char buf[200];
        snprintf(buf, sizeof buf, "%llu in dimension %u is not a multiple "
                 "of the local size %llu the kernel requires (local(...) in "
                 "its declaration)", (unsigned long long)global[d], d,
                 (unsigned long long)k->desc.reqd_local[d]);
        return geometry_err(k, true, "the global size ", buf);
      }
    memcpy(local, k->desc.reqd_local, ndim * sizeof *local);
    return XPJ_OK;
  }
  if (k->fit_f)
    return memo_local(k, ndim, global, local);
  plain_local(k, ndim, global, local);
  return XPJ_OK;
}

static xpj_status check_geometry(xpj_kernel *k, const xpj_range *r,
                                 rt_launch *l) {
  const xpj_device_info *di = &k->dev->info;
  char buf[256];
  xpj_status gst = check_global(k, false, r->ndim, r->global);
  if (gst != XPJ_OK)
    return gst;
  bool any_local = false, all_local = true;
  for (unsigned d = 0; d < r->ndim; d++) {
    any_local |= r->local[d] != 0;
    all_local &= r->local[d] != 0;
  }
  if (any_local && !all_local)
    return launch_err(k, "the local size is 0 in some dimensions but not "
                      "others (give all, or none to let the runtime choose)",
                      NULL);
  if (!any_local && k->desc.local_params && !k->desc.reqd_local[0])
    /* a local array parameter's size is the launch's business, and only a
     * local size it chose says how big the groups indexing it are */
    return launch_err(k, "the local size is 0, and the kernel has local "
                      "array parameters sized by the launch: give the local "
                      "size too (or declare it: ndrange(N) local(...))",
                      NULL);
  uint64_t local[3] = {1, 1, 1};
  if (k->desc.reqd_local[0]) {
    bool same = true;
    for (unsigned d = 0; d < r->ndim && any_local; d++)
      same &= r->local[d] == k->desc.reqd_local[d];
    if (!same) {
      char got[64], want[64];
      size_str(got, sizeof got, r->local, r->ndim);
      size_str(want, sizeof want, k->desc.reqd_local, k->desc.dims);
      snprintf(buf, sizeof buf, "%s is not the %s the kernel requires "
               "(local(...) in its declaration; give it, or 0 to use it)",
               got, want);
      return launch_err(k, "the local size ", buf);
    }
    memcpy(local, k->desc.reqd_local, sizeof local);
  } else if (any_local) {
    uint64_t wg = 1;
    for (unsigned d = 0; d < r->ndim; d++) {
      if (r->local[d] > di->max_work_item_sizes[hw_dim(k, d)]) {
        snprintf(buf, sizeof buf, "%llu in dimension %u is more than the "
                 "device's %llu", (unsigned long long)r->local[d], d,
                 (unsigned long long)di->max_work_item_sizes[hw_dim(k, d)]);
        return launch_err(k, "the local size ", buf);
      }
      wg *= r->local[d];
      local[d] = r->local[d];
    }
    if (wg > kernel_max_wg(k)) {
      snprintf(buf, sizeof buf, "%llu work-items is more than the %llu "
               "allowed", (unsigned long long)wg,
               (unsigned long long)kernel_max_wg(k));
      return launch_err(k, "the work-group size ", buf);
    }
  } else if (k->desc.kind == XPJ_FUNC_NDRANGE) {
    xpj_status st = xpj_kernel_suggest_local(k, r->ndim, r->global, local);
    if (st != XPJ_OK)
      return st;
  }
  /* checked in the user's (logical) order; the launch is kept in hardware
   * order, which every backend and the compiled kernel use */
  l->ndim = r->ndim > k->desc.id_rank ? r->ndim : k->desc.id_rank;
  for (unsigned d = 0; d < 3; d++) {
    bool used = d < r->ndim;
    unsigned h = hw_dim(k, d);
    l->global[h] = used ? (int64_t)r->global[d] : 1;
    l->local[h] = used ? (int64_t)local[d] : 1;
    if (k->desc.kind == XPJ_FUNC_NDRANGE) {
      if (l->global[h] % l->local[h]) {
        snprintf(buf, sizeof buf, "%lld in dimension %u is not a multiple of "
                 "the local size %lld (nd-range kernels need whole "
                 "work-groups)", (long long)l->global[h], d,
                 (long long)l->local[h]);
        return launch_err(k, "the global size ", buf);
      }
      l->groups[h] = l->global[h] / l->local[h];
    } else {
      /* range kernels have no work-groups; a GPU backend rounds the grid
       * up to local (the hint) and the kernel skips the extra items */
      l->groups[h] = (l->global[h] + l->local[h] - 1) / l->local[h];
    }
  }
  return XPJ_OK;
}

/* Elements [lo, hi] touched by a view (hi < lo when it is empty); false on
 * overflow. */
static bool view_extent(const xpj_array *a, int64_t *lo, int64_t *hi) {
  int64_t mn = a->offset, mx = a->offset;
  for (unsigned d = 0; d < a->ndim; d++) {
    if (a->shape[d] == 0) {
      *lo = 0;
      *hi = -1;
      return true;
    }
    int64_t span;
    if (__builtin_mul_overflow(a->strides[d], a->shape[d] - 1, &span))
      return false;
    if (span < 0) {
      if (__builtin_add_overflow(mn, span, &mn))
        return false;
    } else if (__builtin_add_overflow(mx, span, &mx)) {
      return false;
    }
  }
  *lo = mn;
  *hi = mx;
  return true;
}

/* Checks array argument i and holds the allocation it points into. */
static xpj_status check_array(xpj_kernel *k, unsigned i, const rt_karg *p,
                              const xpj_array *a, rt_launch *l) {
  char buf[512];
  const char *pn = p->name;
  if (a->dtype != p->dtype) {
    /* (void: an element type the caller's binding has none for: a
     * NumPy array of non-native byte order or of a structured dtype) */
    snprintf(buf, sizeof buf, "%u '%s' is an array of %s, given an array of "
             "%s", i, pn, xpj_scalar_name(p->dtype),
             a->dtype == XPJ_VOID
                 ? "an element type xpjit has none for (a non-native byte "
                   "order, a structured type: convert it, e.g. NumPy's "
                   "a.astype(a.dtype.newbyteorder('=')))"
             : a->dtype < XPJ_SCALAR_COUNT ? xpj_scalar_name(a->dtype)
                                           : "?");
    return launch_err(k, "argument ", buf);
  }
  if (a->ndim != p->rank) {
    snprintf(buf, sizeof buf, "%u '%s' has rank %u, given an array of rank %u",
             i, pn, p->rank, a->ndim);
    return launch_err(k, "argument ", buf);
  }
  if (!a->data) {
    snprintf(buf, sizeof buf, "%u '%s': the array's data is NULL", i, pn);
    return launch_err(k, "argument ", buf);
  }
  unsigned es = scalar_bytes(a->dtype);
  if ((uintptr_t)a->data % es) {
    snprintf(buf, sizeof buf, "%u '%s': data %p is not aligned to %u bytes",
             i, pn, a->data, es);
    return launch_err(k, "argument ", buf);
  }
  for (unsigned d = 0; d < a->ndim; d++)
    if (a->shape[d] < 0 || (uint64_t)a->shape[d] >= XPJ_MAX_EXTENT) {
      /* GPU code counts on shapes below 2^62 (XPJ_MAX_EXTENT) */
      snprintf(buf, sizeof buf, "%u '%s': shape[%u] is %s (%lld)", i, pn, d,
               a->shape[d] < 0 ? "negative" : "2^62 or more",
               (long long)a->shape[d]);
      return launch_err(k, "argument ", buf);
    }
  int64_t lo, hi;
  if (!view_extent(a, &lo, &hi) || lo < INT64_MIN / 16 ||
      hi > INT64_MAX / 16) {
    snprintf(buf, sizeof buf, "%u '%s': offset, shape and strides overflow",
             i, pn);
    return launch_err(k, "argument ", buf);
  }
  rt_alloc al;
  if (hi < lo) {
    /* empty: nothing is touched, but data still goes to the driver, which
     * may look it up (OpenCL's SVM and USM arguments: Intel's runtime
     * crashed in clEnqueueNDRangeKernel on a pointer into memory freed
     * meanwhile), so the allocation holding it, if any, is held as for
     * any view */
    if (rt_mem_hold(k->dev, a->data, &al))
      l->holds[l->nholds++] = al.base;
    return XPJ_OK;
  }
  uintptr_t first = (uintptr_t)a->data + (uintptr_t)(lo * (int64_t)es);
  uintptr_t last = (uintptr_t)a->data + (uintptr_t)(hi * (int64_t)es) + es;
  /* the allocation holding data, the first or the last byte the view
   * reaches (x + n of an n-element allocation is no host memory) */
  if (rt_mem_hold(k->dev, a->data, &al) ||
      rt_mem_hold(k->dev, (void *)first, &al) ||
      (last > first && rt_mem_hold(k->dev, (void *)(last - 1), &al))) {
    l->holds[l->nholds++] = al.base;
    if (first < al.base || last > al.base + al.bytes || last < first) {
      /* one reference point, the allocation's start (data is at some
       * byte of it, the view's elements are counted from data) */
      snprintf(buf, sizeof buf, "%u '%s': the view reaches bytes [%lld, "
               "%lld) of its %zu-byte allocation (elements %lld to %lld "
               "from data, which is at byte %lld of it)", i, pn,
               (long long)((intptr_t)first - (intptr_t)al.base),
               (long long)((intptr_t)last - (intptr_t)al.base), al.bytes,
               (long long)lo, (long long)hi,
               (long long)((intptr_t)a->data - (intptr_t)al.base));
      return launch_err(k, "argument ", buf);
    }
  } else if (rt_mem_check_retired(k->dev, a->data, "") != XPJ_OK) {
    snprintf(buf, sizeof buf, "%u '%s': data %p is in memory that was freed "
             "(xpj_mem_free) and waits for the commands that use it", i, pn,
             a->data);
    return launch_err(k, "argument ", buf);
  } else if (rt_mem_check_retired(k->dev, (void *)first, "") != XPJ_OK) {
    /* data outside it, the view's first element inside (one that begins
     * before it runs into it: rt_mem_entered, below) */
    snprintf(buf, sizeof buf, "%u '%s': the view (bytes [%lld, %lld) from "
             "data, which is no allocation) reaches into memory that was "
             "freed (xpj_mem_free) and waits for the commands that use it",
             i, pn, (long long)(lo * (int64_t)es),
             (long long)(hi * (int64_t)es + es));
    return launch_err(k, "argument ", buf);
  } else if (rt_mem_entered(k->dev, (void *)first, last - first)) {
    snprintf(buf, sizeof buf, "%u '%s': the view (bytes [%lld, %lld) from "
             "data, which is no allocation) runs into an allocation", i, pn,
             (long long)(lo * (int64_t)es), (long long)(hi * (int64_t)es + es));
    return launch_err(k, "argument ", buf);
  } else if (k->dev->info.backend != XPJ_BACKEND_CPU ||
             rt_mem_other_device(k->dev, a->data)) {
    snprintf(buf, sizeof buf, "%u '%s': data %p is not memory of %s", i, pn,
             a->data, k->dev->id);
    return launch_err(k, "argument ", buf);
  }
  return XPJ_OK;
}

/* Local array parameter i of count elements: reserved after the kernel's
 * own local memory and the parameters before it, each at 16-byte
 * alignment; a __local pointer's size for SPIR-V, else a byte offset
 * (CPU: into the group's local memory; PTX: into the dynamic shared
 * memory). Then the element count. Advances *s past both. */
static uint64_t align16(uint64_t n) { return (n + 15) & ~(uint64_t)15; }

static xpj_status local_arg(xpj_kernel *k, unsigned i, uint64_t count,
                            rt_launch *l, uint64_t *slots, rt_abi_arg *abi,
                            unsigned *s) {
  const rt_karg *p = &k->desc.args[i];
  uint64_t es = scalar_bytes(p->dtype), cap = k->dev->info.local_mem_size;
  uint64_t start = align16(l->dyn_local_bytes), base = align16(k->local_bytes);
  char buf[320];
  if (count == 0 || count > cap / es || base + start + count * es > cap) {
    char bytes[48];
    if (count <= cap / es)
      snprintf(bytes, sizeof bytes, "%llu byte%s",
               (unsigned long long)(count * es), count * es == 1 ? "" : "s");
    else
      snprintf(bytes, sizeof bytes, "%u byte%s each", (unsigned)es,
               es == 1 ? "" : "s");
    snprintf(buf, sizeof buf, "%u '%s': %llu element%s of local memory (%s) "
             "%s; the kernel's own local arrays take %llu byte%s and %s has "
             "%llu per work-group", i, p->name, (unsigned long long)count,
             count == 1 ? "" : "s", bytes,
             count ? "with the local array parameters before it do not fit"
                   : "is no local array (give at least one element)",
             (unsigned long long)k->local_bytes,
             k->local_bytes == 1 ? "" : "s", k->dev->id,
             (unsigned long long)cap);
    return launch_err(k, "argument ", buf);
  }
  if (k->dev->target.kind == XPJ_TARGET_SPIRV) {
    abi[*s].local = count * es;
    l->args[*s] = NULL;
  } else {
    slots[*s] = (k->dev->target.kind == XPJ_TARGET_CPU ? base : 0) + start;
    l->args[*s] = &slots[*s];
  }
  (*s)++;
  slots[*s] = count;
  l->args[*s] = &slots[*s];
  (*s)++;
  l->dyn_local_bytes = start + count * es;
  return XPJ_OK;
}

xpj_status rt_launch_prepare(xpj_kernel *k, const xpj_range *r,
                             unsigned nargs, const xpj_arg *args,
                             rt_launch **out) {
  *out = NULL;
  char buf[512];
  if (nargs != k->desc.nargs) {
    snprintf(buf, sizeof buf, "%u given, the kernel takes %u", nargs,
             k->desc.nargs);
    return launch_err(k, "wrong number of arguments: ", buf);
  }
  if (nargs && !args)
    return launch_err(k, "args is NULL", NULL);
  /* the command's block: the launch, then per ABI argument (and the
   * hidden ones) a pointer, an 8-byte slot and its kind */
  unsigned nsizes = k->desc.kind == XPJ_FUNC_RANGE ? 3 : 0,
           nh = nsizes + (k->checks ? 1 : 0), nall = k->desc.nabi + nh;
  size_t sz = sizeof(rt_launch) + nargs * sizeof(uintptr_t) +
              nall * (sizeof(void *) + 8 + sizeof(rt_abi_arg));
  rt_launch *l = calloc(1, sz);
  if (!l)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  l->dev = k->dev;
  atomic_init(&l->stop, false);
  l->holds = (uintptr_t *)(l + 1);
  l->native = k->native;
  l->kind = k->desc.kind;
  l->nabi = k->desc.nabi;
  l->nhidden = nh;
  l->args = (void **)(l->holds + nargs);
  uint64_t *slots = (uint64_t *)(l->args + nall);
  rt_abi_arg *abi = (rt_abi_arg *)(slots + nall);
  l->abi = abi;
  for (unsigned j = 0; j < nall; j++)
    abi[j].size = 8; /* int64 unless said otherwise below */
  l->local_bytes = k->local_bytes;
  l->scratch_bytes = k->scratch_bytes;
  xpj_status st = check_geometry(k, r, l);
  unsigned s = 0;
  for (unsigned i = 0; st == XPJ_OK && i < nargs; i++) {
    const rt_karg *p = &k->desc.args[i];
    const xpj_arg *a = &args[i];
    static const char *const kinds[] = {
        "a scalar", "an array", "a local array (xpj_arg_local)"};
    if (a->kind != XPJ_ARG_ARRAY && a->kind != XPJ_ARG_SCALAR &&
        a->kind != XPJ_ARG_LOCAL) {
      snprintf(buf, sizeof buf, "%u '%s': unknown argument kind %d (make "
               "arguments with xpj_arg_array, xpj_arg_local or "
               "xpj_arg_<dtype>)", i, p->name, (int)a->kind);
      st = launch_err(k, "argument ", buf);
      break;
    }
    if (a->kind != p->kind) {
      snprintf(buf, sizeof buf, "%u '%s' is %s, given %s", i, p->name,
               kinds[p->kind], kinds[a->kind]);
      st = launch_err(k, "argument ", buf);
      break;
    }
    if (p->kind == XPJ_ARG_LOCAL) {
      st = local_arg(k, i, a->v.u, l, slots, abi, &s);
      if (st != XPJ_OK)
        break;
      continue;
    }
    if (p->kind == XPJ_ARG_SCALAR) {
      if (a->dtype != p->dtype) {
        snprintf(buf, sizeof buf, "%u '%s' is %s, given %s", i, p->name,
                 xpj_scalar_name(p->dtype),
                 a->dtype < XPJ_SCALAR_COUNT ? xpj_scalar_name(a->dtype)
                                             : "an unknown type");
        st = launch_err(k, "argument ", buf);
        break;
      }
      uint64_t *v = &slots[s];
      switch (p->dtype) {
      case XPJ_BOOL: *(uint8_t *)v = a->v.i != 0; break;
      case XPJ_I8: *(int8_t *)v = (int8_t)a->v.i; break;
      case XPJ_I16: *(int16_t *)v = (int16_t)a->v.i; break;
      case XPJ_I32: *(int32_t *)v = (int32_t)a->v.i; break;
      case XPJ_I64: *(int64_t *)v = a->v.i; break;
      case XPJ_U8: *(uint8_t *)v = (uint8_t)a->v.u; break;
      case XPJ_U16: *(uint16_t *)v = (uint16_t)a->v.u; break;
      case XPJ_U32: *(uint32_t *)v = (uint32_t)a->v.u; break;
      case XPJ_U64: *(uint64_t *)v = a->v.u; break;
      case XPJ_F32: *(float *)v = (float)a->v.f; break;
      case XPJ_F64: *(double *)v = a->v.f; break;
      case XPJ_F16: *(uint16_t *)v = xpj_f16_from_double(a->v.f); break;
      case XPJ_BF16: *(uint16_t *)v = xpj_bf16_from_double(a->v.f); break;
      default: break;
      }
      l->args[s] = v;
      abi[s].size = (uint8_t)scalar_bytes(p->dtype);
      s++;
      continue;
    }
    if (!a->array) {
      snprintf(buf, sizeof buf, "%u '%s': the array is NULL", i, p->name);
      st = launch_err(k, "argument ", buf);
      break;
    }
    st = check_array(k, i, p, a->array, l);
    if (st != XPJ_OK)
      break;
    const xpj_array *arr = a->array;
    memcpy(&slots[s], &arr->data, sizeof(void *));
    l->args[s] = &slots[s];
    abi[s].size = sizeof(void *);
    abi[s].ptr = 1;
    s++;
    slots[s] = (uint64_t)arr->offset;
    l->args[s] = &slots[s];
    s++;
    for (unsigned d = 0; d < p->rank; d++, s++) {
      slots[s] = (uint64_t)arr->shape[d];
      l->args[s] = &slots[s];
    }
    for (unsigned d = 0; d < p->rank; d++, s++) {
      slots[s] = (uint64_t)arr->strides[d];
      l->args[s] = &slots[s];
    }
  }
  if (st == XPJ_OK && l->dyn_local_bytes &&
      k->dev->target.kind == XPJ_TARGET_CPU) /* after the kernel's own */
    l->local_bytes = align16(k->local_bytes) + l->dyn_local_bytes;
  if (st != XPJ_OK) {
    rt_launch_free(l);
    return st;
  }
  for (unsigned d = 0; d < nsizes; d++) { /* the logical global size */
    slots[k->desc.nabi + d] = (uint64_t)l->global[d];
    l->args[k->desc.nabi + d] = &slots[k->desc.nabi + d];
  }
  if (k->checks) { /* the last hidden argument: the check record */
    void *rec = NULL;
    st = k->dev->ops->mem_alloc(k->dev, XPJ_MEM_HOST, sizeof(xpj_check_record),
                                64, &rec);
    if (st != XPJ_OK) {
      rt_err(st, "launch of %s: no host memory for the bounds check's "
             "record: %s", rt_kernel_signature(k), xpj_last_error());
      rt_launch_free(l);
      return st;
    }
    memset(rec, 0, sizeof(xpj_check_record));
    l->check = rec;
    l->checked = rt_checked_retain(k->checked);
    memcpy(&slots[nall - 1], &rec, sizeof rec);
    l->args[nall - 1] = &slots[nall - 1];
    abi[nall - 1].size = sizeof(void *);
    abi[nall - 1].ptr = 1;
  }
  *out = l;
  return XPJ_OK;
}

xpj_status rt_launch_verdict(const rt_launch *l) {
  const xpj_check_record *r = l->check;
  if (!r || !r->hit || !l->checked)
    return XPJ_OK;
  const rt_checked *k = l->checked;
  /* the record is the kernel's word: believe only what fits the module */
  const xpj_func *f = k->sm && r->func < xpj_module_func_count(k->sm)
                          ? xpj_module_func(k->sm, r->func) : NULL;
  xpj_index_info ii;
  if (!f || xpj_func_index_info(f, r->inst, &ii) != XPJ_OK ||
      r->param > k->nargs)
    return rt_err(XPJ_ERR_BOUNDS, "launch of %s indexed outside an array "
                  "(XPJIT_CHECK=bounds; the record of where is malformed: "
                  "function %u, instruction %u)", k->signature, r->func,
                  r->inst);
  const char *file = xpj_module_file_name(k->sm, ii.loc.file);
  char what[192], where[128] = "", idx[128];
  if (r->param)
    snprintf(what, sizeof what, "argument %u '%s'", r->param - 1,
             k->args[r->param - 1]);
  else
    snprintf(what, sizeof what, "%s array '%s'",
             ii.space == XPJ_SPACE_LOCAL ? "local" : "private", ii.array);
  if (strcmp(xpj_func_name(f), k->name))
    snprintf(where, sizeof where, " (in function %s%s%s)", xpj_func_name(f),
             ii.param >= 0 && r->param ? ", as " : "",
             ii.param >= 0 && r->param ? ii.array : "");
  if (r->dim == UINT32_MAX)
    snprintf(idx, sizeof idx, "flat index %lld, the array has %lld elements",
             (long long)r->index, (long long)r->extent);
  else if (r->dim < 32 && ii.unsigned_dims >> r->dim & 1)
    snprintf(idx, sizeof idx, "index %u is %llu, its extent is %lld",
             r->dim, (unsigned long long)r->index, (long long)r->extent);
  else
    snprintf(idx, sizeof idx, "index %u is %lld, its extent is %lld",
             r->dim, (long long)r->index, (long long)r->extent);
  return rt_err(XPJ_ERR_BOUNDS, "launch of %s: out-of-bounds %s %s at "
                "%s%s%u:%u%s: %s (XPJIT_CHECK=bounds: the first violation; "
                "the access went %s)", k->signature, ii.access, what,
                file ? file : "", file ? ":" : "line ", ii.loc.line,
                ii.loc.col, where, idx,
                /* global views' accesses go to the record's sink, local and
                 * private arrays' to their first element (codegen.c) */
                ii.space == XPJ_SPACE_GLOBAL ? "nowhere"
                                             : "to the array's first element");
}

void rt_launch_release_holds(rt_launch *l) {
  for (unsigned i = 0; i < l->nholds; i++)
    rt_mem_release(l->dev, l->holds[i]);
  l->nholds = 0;
}

void rt_launch_free(rt_launch *l) {
  if (!l)
    return;
  rt_launch_release_holds(l);
  if (l->check)
    l->dev->ops->mem_free(l->dev, XPJ_MEM_HOST, l->check);
  rt_checked_release(l->checked);
  free(l);
}

xpj_status xpj_launch(xpj_queue *q, xpj_kernel *k, const xpj_range *r,
                      unsigned nargs, const xpj_arg *args, xpj_event **ev) {
  if (ev)
    *ev = NULL;
  if (!q || !k || !r)
    return rt_err(XPJ_ERR_INVALID, "xpj_launch: %s is NULL",
                  !q ? "the queue" : !k ? "the kernel" : "the range");
  if (rt_inherited(xpj_queue_device(q)->ctx) || rt_inherited(k->dev->ctx))
    return rt_err_inherited("xpj_launch", rt_inherited(k->dev->ctx)
                                              ? "kernel" : "queue");
  if (xpj_queue_device(q) != k->dev)
    return rt_err(XPJ_ERR_INVALID,
                  xpj_queue_device(q)->ctx != k->dev->ctx
                      ? "xpj_launch: kernel %s belongs to another context "
                        "(its %s) than the queue (on %s)"
                      : "xpj_launch: kernel %s was compiled for %s, the "
                        "queue is on %s",
                  k->name, k->dev->id, xpj_queue_device(q)->id);
  rt_launch *l;
  xpj_status st = rt_launch_prepare(k, r, nargs, args, &l);
  if (st != XPJ_OK)
    return st;
  return rt_queue_launch(q, l, ev);
}
