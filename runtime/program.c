/* program.c - programs and kernels: with kcache.c, the part of the
 * runtime that calls the compiler. A program holds parsed source; a kernel
 * is one specialisation (dtypes, ndim) for one device with one set of
 * options. Its binary comes through the caches (kcache.c); the program
 * keeps its own list of the kernels it handed out, the fastest lookup;
 * another program of the same source finds a kernel loaded in the context
 * from the request as given (quick_key, rt_cc_quick), without specialising
 * it again. */
#include "buf.h" /* xpj_dec */
#include "daemon.h"
#include "frontend.h"
#include "rt.h"

#include <nettle/sha2.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct xpj_program {
  xpj_context *ctx;
  char *name;
  xpj_module *m;
  char *src; /* the source text, for xpjitd */
  size_t src_len;
  char src_digest[65]; /* SHA-256 of src ("" without one): quick_key */
  uint64_t serial;      /* unique in the process: quick_key without src */
  unsigned nkernels;
  const char **kernels; /* names, owned by m */
  pthread_mutex_t mu;
  xpj_kernel *list;
};

static xpj_status diag_error(xpj_status st, xpj_diags *d, const char *what) {
  char *text = NULL;
  if (xpj_diags_render(d, &text, NULL) == XPJ_OK && text && *text) {
    size_t n = strlen(text);
    while (n && text[n - 1] == '\n')
      text[--n] = 0;
    rt_err(st, "%s", text);
  } else {
    rt_err(st, "%s: %s", what, xpj_status_name(st));
  }
  free(text);
  return st;
}

static xpj_status program_finish(xpj_context *ctx, const char *name,
                                 xpj_module *m, xpj_program **out) {
  xpj_program *p = calloc(1, sizeof *p);
  unsigned nf = xpj_module_func_count(m);
  if (p)
    p->kernels = calloc(nf ? nf : 1, sizeof *p->kernels);
  if (p)
    p->name = strdup(name);
  if (!p || !p->kernels || !p->name) {
    if (p) {
      free(p->kernels);
      free(p->name);
    }
    free(p);
    xpj_module_destroy(m);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  p->ctx = ctx;
  rt_context_retain(ctx);
  p->m = m;
  static atomic_ullong serials;
  p->serial = atomic_fetch_add(&serials, 1) + 1;
  for (unsigned i = 0; i < nf; i++) {
    const xpj_func *f = xpj_module_func(m, i);
    if (xpj_func_kind_of(f) != XPJ_FUNC_DEVICE)
      p->kernels[p->nkernels++] = xpj_func_name(f);
  }
  pthread_mutex_init(&p->mu, NULL);
  *out = p;
  return XPJ_OK;
}

/* The file's bytes, or NULL (xpj_parse_file then says why). */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (cap - n < 65536) {
      if (cap > XPJ_MAX_SOURCE + 65536u) /* xpj_parse_file says why */
        break;
      char *nb = realloc(buf, cap = cap * 2 + 65536);
      if (!nb)
        break;
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) {
      if (ferror(f))
        break;
      fclose(f);
      *len = n;
      return buf;
    }
  }
  fclose(f);
  free(buf);
  return NULL;
}

static xpj_status create(xpj_context *ctx, const char *name, const char *src,
                         size_t len, const char *path, xpj_diags *d,
                         xpj_program **out) {
  const char *api = path ? "xpj_program_create_file" : "xpj_program_create";
  if (!out)
    return rt_err(XPJ_ERR_INVALID, "%s: out is NULL", api);
  *out = NULL;
  if (!ctx)
    return rt_err(XPJ_ERR_INVALID, "%s: the context is NULL", api);
  if (rt_inherited(ctx))
    return rt_err_inherited(api, "context");
  if (!path && !src && len)
    return rt_err(XPJ_ERR_INVALID, "%s: src is NULL and len %zu", api, len);
  xpj_diags *own = NULL;
  if (!d && xpj_diags_create(&own) != XPJ_OK)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  xpj_diags *dd = d ? d : own;
  xpj_module *m = NULL;
  /* the text is kept for the daemon, so a file is read once, here */
  char *text = NULL;
  size_t tlen = 0;
  if (path) {
    text = slurp(path, &tlen);
  } else if (len <= XPJ_MAX_SOURCE) { /* a larger one xpj_parse refuses
                                         before it reads a byte: no copy */
    if (!(text = malloc(len + 1))) {
      xpj_diags_destroy(own);
      return rt_err(XPJ_ERR_NOMEM, "out of memory");
    }
    if (len)
      memcpy(text, src, len);
    text[len] = 0;
    tlen = len;
  }
  xpj_status st = xpj_module_create(&m);
  if (st == XPJ_OK)
    st = path && !text ? xpj_parse_file(m, path, dd)
                       : xpj_parse(m, path ? path : name ? name : "<source>",
                                   text ? text : src, text ? tlen : len, dd);
  if (st != XPJ_OK) {
    diag_error(st, dd, path ? path : name ? name : "<source>");
    xpj_module_destroy(m);
    xpj_diags_destroy(own);
    free(text);
    return st;
  }
  xpj_diags_destroy(own);
  st = program_finish(ctx, path ? path : name ? name : "<source>", m, out);
  if (st == XPJ_OK) {
    (*out)->src = text;
    (*out)->src_len = tlen;
    if (text) {
      struct sha256_ctx h;
      uint8_t raw[SHA256_DIGEST_SIZE];
      sha256_init(&h);
      sha256_update(&h, tlen, (const uint8_t *)text);
      sha256_digest(&h, sizeof raw, raw);
      static const char hexd[] = "0123456789abcdef";
      for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
        (*out)->src_digest[2 * i] = hexd[raw[i] >> 4];
        (*out)->src_digest[2 * i + 1] = hexd[raw[i] & 15];
      }
      (*out)->src_digest[2 * SHA256_DIGEST_SIZE] = 0;
    }
  } else {
    free(text);
  }
  return st;
}

xpj_status xpj_program_create(xpj_context *ctx, const char *name,
                              const char *src, size_t len, xpj_diags *d,
                              xpj_program **out) {
  return create(ctx, name, src, len, NULL, d, out);
}

xpj_status xpj_program_create_file(xpj_context *ctx, const char *path,
                                   xpj_diags *d, xpj_program **out) {
  if (!path) {
    if (out)
      *out = NULL;
    return rt_err(XPJ_ERR_INVALID, "xpj_program_create_file: path is NULL");
  }
  return create(ctx, NULL, NULL, 0, path, d, out);
}

rt_checked *rt_checked_retain(rt_checked *c) {
  atomic_fetch_add(&c->refs, 1);
  return c;
}

void rt_checked_release(rt_checked *c) {
  if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
    return;
  free(c->name);
  free(c->signature);
  for (unsigned i = 0; i < c->nargs; i++)
    free(c->args[i]);
  free(c->args);
  free(c);
}

/* k's rt_checked, explaining with sm (kept by the context's first level);
 * NULL when out of memory. */
static rt_checked *checked_new(const xpj_kernel *k, const xpj_module *sm) {
  rt_checked *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  atomic_init(&c->refs, 1);
  c->name = strdup(k->name);
  c->signature = strdup(rt_kernel_signature(k));
  c->args = calloc(k->desc.nargs ? k->desc.nargs : 1, sizeof *c->args);
  bool ok = c->name && c->signature && c->args;
  for (unsigned i = 0; ok && i < k->desc.nargs; i++, c->nargs++)
    ok = (c->args[i] = strdup(k->desc.args[i].name)) != NULL;
  if (!ok) {
    rt_checked_release(c);
    return NULL;
  }
  c->sm = sm;
  return c;
}

static void kernel_free(xpj_kernel *k) {
  /* k->native belongs to the context's first level */
  free(atomic_load(&k->signature));
  if (k->fit_f)
    pthread_mutex_destroy(&k->fit_mu);
  rt_checked_release(k->checked);
  free(k);
}

void xpj_program_destroy(xpj_program *p) {
  if (!p || rt_inherited(p->ctx)) /* a parent's, in a child: left alone */
    return;
  for (xpj_kernel *k = p->list, *n; k; k = n) {
    n = k->next;
    kernel_free(k);
  }
  pthread_mutex_destroy(&p->mu);
  xpj_module_destroy(p->m);
  free(p->src);
  free(p->kernels);
  free(p->name);
  xpj_context *ctx = p->ctx;
  free(p);
  rt_context_release(ctx);
}

const xpj_module *xpj_program_module(const xpj_program *p) {
  return p ? p->m : NULL;
}

unsigned xpj_program_kernel_count(const xpj_program *p) {
  return p ? p->nkernels : 0;
}

const char *xpj_program_kernel_name(const xpj_program *p, unsigned i) {
  return p && i < p->nkernels ? p->kernels[i] : NULL;
}

/* Parses "T=f32,TS=16" or "f32,16" against f's type and const parameters
 * into types[] and consts[] (each in its parameters' order) and writes the
 * canonical form to canon: every parameter named, in declaration order,
 * values in xpj_const_str's form ("TS=0x10" and "TS=16" are one). */
xpj_status rt_parse_dtypes(const xpj_func *f, const char *s,
                           xpj_scalar *types, int64_t *consts, char *canon,
                           size_t csize) {
  unsigned nt = xpj_func_tparam_count(f), nc = xpj_func_const_count(f);
  unsigned ng = xpj_func_generic_count(f);
  const char *kname = xpj_func_name(f);
  bool cset[XPJ_MAX_CPARAMS] = {0};
  for (unsigned i = 0; i < nt; i++)
    types[i] = XPJ_VOID;
  for (unsigned i = 0; i < nc; i++)
    consts[i] = 0;
  unsigned pos = 0;
  bool named = false, positional = false;
  const char *p = s ? s : "";
  while (*p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char tok[128];
    if (n == 0 || n >= sizeof tok)
      return rt_err(XPJ_ERR_SPECIALIZE,
                    "kernel %s: malformed dtypes \"%s\" (expected T=f32,U=i64 "
                    "or f32,i64%s)", kname, s, nc ? "; const parameters "
                    "like N=16" : "");
    memcpy(tok, p, n);
    tok[n] = 0;
    char *eq = strchr(tok, '=');
    int idx = -1, is_const = 0;
    const char *tname = tok;
    if (eq) {
      *eq = 0;
      tname = eq + 1;
      named = true;
      for (unsigned i = 0; i < nt && idx < 0; i++)
        if (!strcmp(xpj_func_tparam_name(f, i), tok))
          idx = (int)i;
      for (unsigned i = 0; i < nc && idx < 0; i++)
        if (!strcmp(xpj_func_const_name(f, i), tok)) {
          idx = (int)i;
          is_const = 1;
        }
      if (idx < 0)
        return rt_err(XPJ_ERR_SPECIALIZE, "kernel %s has no %s parameter "
                      "'%s'", kname, nc ? "type or const" : "type", tok);
    } else {
      positional = true;
      idx = xpj_func_generic_at(f, pos++, &is_const);
      if (idx < 0) {
        if (nc)
          return rt_err(XPJ_ERR_SPECIALIZE,
                        "kernel %s takes %u type and const parameters, "
                        "dtypes \"%s\" gives more", kname, ng, s);
        return rt_err(XPJ_ERR_SPECIALIZE,
                      "kernel %s takes %u type parameter%s, dtypes \"%s\" "
                      "gives more",
                      kname, nt, nt == 1 ? "" : "s", s);
      }
    }
    if (named && positional)
      return rt_err(XPJ_ERR_SPECIALIZE,
                    "kernel %s: dtypes \"%s\" mixes T=type and positional "
                    "types", kname, s);
    xpj_scalar t = xpj_scalar_parse(tname);
    if (is_const) {
      const char *cn = xpj_func_const_name(f, (unsigned)idx);
      xpj_scalar ct = xpj_func_const_type(f, (unsigned)idx);
      if (t != XPJ_VOID)
        return rt_err(XPJ_ERR_SPECIALIZE,
                      "kernel %s: '%s' is a const parameter (%s: %s); it "
                      "takes a value, not the dtype '%s'",
                      kname, cn, cn, xpj_scalar_name(ct), tname);
      if (cset[idx])
        return rt_err(XPJ_ERR_SPECIALIZE,
                      "kernel %s: const parameter '%s' bound twice", kname,
                      cn);
      char err[160];
      if (xpj_const_parse(tname, ct, &consts[idx], err, sizeof err) !=
          XPJ_OK)
        return rt_err(XPJ_ERR_SPECIALIZE,
                      "kernel %s: const parameter '%s: %s': %s", kname, cn,
                      xpj_scalar_name(ct), err);
      cset[idx] = true;
    } else {
      const char *tpn = xpj_func_tparam_name(f, (unsigned)idx);
      if (t == XPJ_VOID)
        return rt_err(XPJ_ERR_SPECIALIZE,
                      "kernel %s: unknown dtype '%s' for type parameter "
                      "'%s' (bool, i8..i64, u8..u64, f16, bf16, f32, f64)",
                      kname, tname, tpn);
      if (types[idx] != XPJ_VOID)
        return rt_err(XPJ_ERR_SPECIALIZE,
                      "kernel %s: type parameter '%s' bound twice", kname,
                      tpn);
      types[idx] = t;
    }
    p += n;
    if (*p == ',')
      p++;
    if (e && !*p)
      return rt_err(XPJ_ERR_SPECIALIZE,
                    "kernel %s: malformed dtypes \"%s\"", kname, s);
  }
  size_t c = 0;
  canon[0] = 0;
  for (unsigned i = 0; i < ng; i++) {
    int is_const = 0, k = xpj_func_generic_at(f, i, &is_const);
    char vb[32];
    if (is_const) {
      const char *cn = xpj_func_const_name(f, (unsigned)k);
      xpj_scalar ct = xpj_func_const_type(f, (unsigned)k);
      if (!cset[k])
        return rt_err(XPJ_ERR_SPECIALIZE,
                      "kernel %s: no value for const parameter '%s: %s' "
                      "(give dtypes like \"%s=%s\")",
                      kname, cn, xpj_scalar_name(ct), cn,
                      ct == XPJ_BOOL ? "true" : "16");
      xpj_const_str(ct, consts[k], vb, sizeof vb);
      c += (size_t)snprintf(canon + c, c < csize ? csize - c : 0, "%s%s=%s",
                            i ? "," : "", cn, vb);
    } else {
      const char *tpn = xpj_func_tparam_name(f, (unsigned)k);
      if (types[k] == XPJ_VOID)
        return rt_err(XPJ_ERR_SPECIALIZE,
                      "kernel %s: no dtype for type parameter '%s' (give "
                      "dtypes like \"%s=f32\")",
                      kname, tpn, tpn);
      c += (size_t)snprintf(canon + c, c < csize ? csize - c : 0, "%s%s=%s",
                            i ? "," : "", tpn, xpj_scalar_name(types[k]));
    }
  }
  if (c >= csize)
    return rt_err(XPJ_ERR_SPECIALIZE,
                  "kernel %s: the dtypes are too long (%zu bytes; at most "
                  "%zu)", kname, c, csize ? csize - 1 : 0);
  return XPJ_OK;
}

/* d: the signature and argument metadata of the specialised kernel f (or
 * its signature alone: xpj_specialize_signature, never for a kernel with
 * const parameters) and the rank of the work-item ids it reads: f's, or
 * for a signature alone gf's, the kernel as parsed (specialising leaves
 * its body's work-item queries as they are, unless a const parameter
 * names their dimension: parse.c leaves that one at 0). d->args is
 * malloc'd, the caller's; its names point into f's module. */
static xpj_status describe(rt_kdesc *d, const xpj_module *sm,
                           const xpj_func *f, const xpj_func *gf) {
  unsigned n = xpj_func_param_count(f);
  rt_karg *args = calloc(n ? n : 1, sizeof *args);
  if (!args)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  *d = (rt_kdesc){.kind = xpj_func_kind_of(f),
                  .dims = xpj_func_dims(f),
                  .id_rank = xpj_func_id_rank(xpj_func_const_count(gf) ? f
                                                                       : gf),
                  .nargs = n,
                  .args = args};
  xpj_func_reqd_local(f, d->reqd_local);
  for (unsigned i = 0; i < n; i++) {
    xpj_type t = xpj_func_param_type(f, i);
    rt_karg *a = &args[i];
    a->name = xpj_func_param_name(f, i);
    a->dtype = xpj_type_elem_scalar(sm, t);
    if (xpj_type_kind_of(sm, t) == XPJ_TYPE_VIEW &&
        xpj_type_space(sm, t) == XPJ_SPACE_LOCAL) {
      a->kind = XPJ_ARG_LOCAL; /* a pointer or byte offset, the count */
      a->rank = 1;
      d->local_params = true;
      d->nabi += 2;
    } else if (xpj_type_kind_of(sm, t) == XPJ_TYPE_VIEW) {
      a->kind = XPJ_ARG_ARRAY;
      a->rank = (unsigned)xpj_type_rank(sm, t);
      a->is_const = xpj_type_is_const(sm, t);
      d->nabi += 2 + 2 * a->rank;
    } else {
      a->kind = XPJ_ARG_SCALAR;
      d->nabi += 1;
    }
  }
  return XPJ_OK;
}

/* "name(a: T, ...)" from k's module; NULL when out of memory. */
static char *make_signature(const xpj_kernel *k) {
  const xpj_func *f = k->sm ? xpj_module_find(k->sm, k->name) : NULL;
  size_t cap = 256, len = 0;
  char *sig = malloc(cap);
  if (!f || !sig) {
    free(sig);
    return NULL;
  }
  len = (size_t)snprintf(sig, cap, "%s(", k->name);
  for (unsigned i = 0; i < k->desc.nargs; i++) {
    char ts[128];
    xpj_type_str(k->sm, xpj_func_param_type(f, i), ts, sizeof ts);
    size_t need = len + strlen(k->desc.args[i].name) + strlen(ts) + 8;
    if (need > cap) {
      cap = need * 2;
      char *ns = realloc(sig, cap);
      if (!ns) {
        free(sig);
        return NULL;
      }
      sig = ns;
    }
    len += (size_t)snprintf(sig + len, cap - len, "%s%s: %s", i ? ", " : "",
                            k->desc.args[i].name, ts);
  }
  snprintf(sig + len, cap - len, ")");
  return sig;
}

const char *rt_kernel_signature(const xpj_kernel *k) {
  xpj_kernel *mk = (xpj_kernel *)k; /* made once, then read-only */
  char *sig = atomic_load_explicit(&mk->signature, memory_order_acquire);
  if (sig)
    return sig;
  char *made = make_signature(k), *none = NULL;
  if (!made)
    return "";
  if (atomic_compare_exchange_strong_explicit(&mk->signature, &none, made,
                                              memory_order_acq_rel,
                                              memory_order_acquire))
    return made;
  free(made); /* another thread made it first */
  return none;
}

static xpj_kernel *find(xpj_program *p, const char *name, const char *dtypes,
                        unsigned ndim, const xpj_device *dev,
                        const char *opts) {
  for (xpj_kernel *k = p->list; k; k = k->next)
    if (k->dev == dev && k->ndim == ndim && !strcmp(k->name, name) &&
        !strcmp(k->dtypes, dtypes) && !strcmp(k->opts, opts))
      return k;
  return NULL;
}

/* Specialises f (its signature alone unless body) for the binding. */
static xpj_status specialise_as(xpj_program *p, const xpj_func *f,
                                const xpj_scalar *types,
                                const int64_t *consts, unsigned ndim,
                                bool body, xpj_module **sm) {
  const char *name = xpj_func_name(f);
  unsigned nt = xpj_func_tparam_count(f), nc = xpj_func_const_count(f);
  const char *names[XPJ_MAX_TPARAMS], *cnames[XPJ_MAX_CPARAMS];
  for (unsigned i = 0; i < nt; i++)
    names[i] = xpj_func_tparam_name(f, i);
  for (unsigned i = 0; i < nc; i++)
    cnames[i] = xpj_func_const_name(f, i);
  xpj_spec spec = {nt, names, types, ndim, nc, cnames, consts};
  xpj_diags *d = NULL;
  if (xpj_diags_create(&d) != XPJ_OK)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  xpj_status st = body ? xpj_specialize(p->m, name, &spec, sm, d)
                       : xpj_specialize_signature(p->m, name, &spec, sm, d);
  if (st != XPJ_OK)
    diag_error(st, d, name);
  xpj_diags_destroy(d);
  return st;
}

static xpj_status specialise(xpj_program *p, const xpj_func *f,
                             const xpj_scalar *types, const int64_t *consts,
                             unsigned ndim, xpj_module **sm) {
  return specialise_as(p, f, types, consts, ndim, true, sm);
}

/* The source's digest that names a request's alias (rt_request), NULL for
 * a program without source text: its requests have none. */
static const char *src_id(const xpj_program *p) {
  return p->src_digest[0] ? p->src_digest : NULL;
}

/* Whether a request for kernel f may be answered through its alias (the
 * binary from a hit file, rt_cc_obtain, and the kernel described from its
 * signature alone, without specialising or hashing its body): the program
 * has source text, and nothing of the kernel needs its specialised body
 * later: no const parameters (their values parse the source again), no
 * checks (their messages quote the body), not an nd-range kernel whose
 * local size the runtime may choose (fitting it reads the body). */
static bool alias_ok(const xpj_program *p, const xpj_func *f,
                     const xpj_compile_opts *o) {
  uint64_t reqd[3] = {0};
  return src_id(p) && !xpj_func_const_count(f) && !o->checks &&
         !(xpj_func_kind_of(f) == XPJ_FUNC_NDRANGE &&
           !xpj_func_reqd_local(f, reqd));
}

/* Whether the runtime checks the local sizes it chooses for k against its
 * static arrays (launch.c, fitted_local): nd-range kernels that require no
 * size. The analysis runs at the first launch that leaves the size to the
 * runtime, not here: a cache hit stays cheap. */
static bool keep_for_fit(const xpj_kernel *k) {
  return k->desc.kind == XPJ_FUNC_NDRANGE && !k->desc.reqd_local[0];
}

/* A request as the caller gave it (rt_cc_quick): the program's source and
 * the name it was parsed under (which the specialised module, file names
 * included, depends on; a program without source text is named by its
 * serial number), then parts, each length-prefixed; in buf when it fits
 * (QKEY_BUF bytes), else malloc'd (quick_key_free); NULL when out of
 * memory. Built without printf: it is most of a hit's cost. */
enum { QPARTS = 8, QKEY_BUF = 512 };
static char *quick_key(const xpj_program *p, const char *const *parts,
                       unsigned nparts, char buf[QKEY_BUF]) {
  char serial[24];
  serial[xpj_dec(serial, p->serial)] = 0;
  const char *all[QPARTS + 2] = {p->src_digest[0] ? p->src_digest : serial,
                                 p->name};
  for (unsigned i = 0; i < nparts && i < QPARTS; i++)
    all[2 + i] = parts[i] ? parts[i] : "";
  unsigned n = 2 + (nparts < QPARTS ? nparts : QPARTS);
  size_t len[QPARTS + 2], total = 1;
  for (unsigned i = 0; i < n; i++)
    total += (len[i] = strlen(all[i])) + 22;
  char *q = total <= QKEY_BUF ? buf : malloc(total), *w = q;
  if (!q)
    return NULL;
  for (unsigned i = 0; i < n; i++) {
    w += xpj_dec(w, len[i]);
    *w++ = ':';
    memcpy(w, all[i], len[i]);
    w += len[i];
  }
  *w = 0;
  return q;
}

static void quick_key_free(char *q, const char *buf) {
  if (q != buf)
    free(q);
}

/* The compile options as they enter a key, as text for quick_key. */
static void opts_text(const xpj_compile_opts *o, unsigned ctx_checks,
                      char out[96]) {
  xpj_compile_opts d;
  if (!o) {
    xpj_compile_opts_default(&d);
    o = &d;
  }
  char *w = out;
  uint64_t v[5] = {o->opt_level, (uint64_t)(o->fast_math != 0),
                   (uint64_t)(o->debug_info != 0), o->checks | ctx_checks,
                   (uint64_t)(o->fp_contract != 0)};
  for (int i = 0; i < 5; i++) {
    w += xpj_dec(w, v[i]);
    *w++ = ',';
  }
  *w = 0;
}

/* A kernel of p named name for request a on dev, not described yet: one
 * allocation with its name and dtypes; NULL when out of memory. */
static xpj_kernel *kernel_new(xpj_program *p, const char *name,
                              const rt_asked *a, xpj_device *dev) {
  size_t nn = strlen(name) + 1, dn = strlen(a->canon) + 1;
  xpj_kernel *k = calloc(1, sizeof *k + nn + dn);
  if (!k)
    return NULL;
  k->name = memcpy((char *)(k + 1), name, nn);
  k->dtypes = memcpy(k->name + nn, a->canon, dn);
  k->prog = p;
  k->dev = dev;
  k->target = dev->info.target;
  k->ndim = a->ndim;
  k->origin = XPJ_ORIGIN_MEMORY;
  size_t on = strnlen(a->ostr, sizeof k->opts - 1); /* (printf: a tenth of a hit) */
  memcpy(k->opts, a->ostr, on);
  k->opts[on] = 0;
  return k;
}

/* Completes k from what the context knows of its request and its loaded
 * entry e; frees k on failure. */
static xpj_status finish(xpj_kernel *k, const rt_known *kn, const rt_l1 *e,
                         const xpj_compile_opts *o, xpj_kernel **out) {
  k->desc = kn->desc;
  k->sm = kn->sm;
  if (keep_for_fit(k) && (k->fit_f = xpj_module_find(k->sm, k->name)) &&
      pthread_mutex_init(&k->fit_mu, NULL) != 0)
    k->fit_f = NULL;
  k->checks = o->checks;
  if (k->checks && !(k->checked = checked_new(k, k->sm))) {
    kernel_free(k);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  k->native = e->native;
  k->local_bytes = e->v.local_bytes;
  k->scratch_bytes = e->v.scratch_bytes;
  k->compile_ms = e->v.compile_ms;
  *out = k;
  return XPJ_OK;
}

/* The kernel for request a (asked as qkey) on dev, which the context has
 * not loaded under qkey yet: specialised here, obtained through the
 * caches and remembered under qkey. */
static xpj_status build(xpj_program *p, const char *qkey, const rt_asked *a,
                        const xpj_func *f, const xpj_scalar *types,
                        const int64_t *consts, xpj_device *dev,
                        const xpj_compile_opts *o, xpj_kernel **out) {
  const char *name = xpj_func_name(f);
  rt_known kn = {.asked = *a};
  xpj_status st = XPJ_OK;
  xpj_kernel_origin origin = XPJ_ORIGIN_MEMORY;
  rt_l1 *e = NULL;
  /* asked by its alias first (no module: rt_cc_obtain), then with it */
  bool fell_back = false;
  rt_request rq = {{p->src, p->src_len, p->name}, NULL, name, a->canon,
                   a->ndim, dev, &dev->target, dev->info.target, o, a->ostr,
                   src_id(p), &fell_back};
  if (alias_ok(p, f, o) &&
      specialise_as(p, f, types, consts, a->ndim, false, &kn.sm) == XPJ_OK &&
      rt_cc_obtain(p->ctx, &rq, &e, &origin) != XPJ_OK) {
    xpj_module_destroy(kn.sm); /* no alias: the whole way */
    kn.sm = NULL;
    e = NULL;
  }
  if (!e && (st = specialise(p, f, types, consts, a->ndim, &kn.sm)) != XPJ_OK)
    return st;
  xpj_kernel *k = kernel_new(p, name, a, dev);
  st = k ? describe(&kn.desc, kn.sm, xpj_module_find(kn.sm, name), f)
         : rt_err(XPJ_ERR_NOMEM, "out of memory");
  if (st == XPJ_OK) {
    k->desc = kn.desc;
    st = rt_check_reqd_local(k);
  }
  if (st == XPJ_OK && !e) {
    rq.sm = kn.sm;
    st = rt_cc_obtain(p->ctx, &rq, &e, &origin);
  }
  if (st != XPJ_OK) {
    xpj_module_destroy(kn.sm);
    free((void *)kn.desc.args);
    if (k)
      kernel_free(k);
    return st;
  }
  k->origin = origin;
  /* kept by the context from now on: kn's, or what it kept before */
  const rt_known *kept = rt_cc_remember(p->ctx, qkey, e, &kn);
  if (!kept) {
    kernel_free(k);
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  }
  return finish(k, kept, e, o, out);
}

/* Checks the arguments of a kernel request and puts them in canonical
 * form: the function, its dtypes, ndim (0 when it does not matter), the
 * options and their string. */
static xpj_status resolve(xpj_program *p, const char *name,
                          const char *dtypes, unsigned *ndim,
                          const xpj_compile_opts *opts, const xpj_func **fp,
                          xpj_scalar *types, int64_t *consts, char *canon,
                          size_t csize,
                          xpj_compile_opts *o, char *ostr, size_t osize) {
  const xpj_func *f = xpj_module_find(p->m, name);
  if (!f || xpj_func_kind_of(f) == XPJ_FUNC_DEVICE) {
    char list[512] = "";
    size_t n = 0;
    for (unsigned i = 0; i < p->nkernels && n < sizeof list - 80; i++)
      n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "",
                            p->kernels[i]);
    return rt_err(XPJ_ERR_NOT_FOUND, "%s: no kernel named '%s'%s%s%s",
                  p->name, name, f ? " (it is a device function)" : "",
                  p->nkernels ? "; kernels: " : "", list);
  }
  if (opts)
    *o = *opts;
  else
    xpj_compile_opts_default(o);
  if (o->opt_level > 3)
    return rt_err(XPJ_ERR_INVALID, "optimisation level %u (0..3)",
                  o->opt_level);
  if (o->checks & ~XPJ_CHECK_ALL)
    return rt_err(XPJ_ERR_INVALID, "unknown checks 0x%x",
                  o->checks & ~XPJ_CHECK_ALL);
  if ((unsigned)o->isolation > XPJ_ISOLATE_NONE)
    return rt_err(XPJ_ERR_INVALID,
                  "unknown isolation %d (XPJ_ISOLATE_DEFAULT, "
                  "XPJ_ISOLATE_NONE)",
                  (int)o->isolation);
  o->checks |= p->ctx->checks;
  xpj_compile_opts_str(o, ostr, osize);
  xpj_status st = rt_parse_dtypes(f, dtypes, types, consts, canon, csize);
  if (st != XPJ_OK)
    return st;
  if (xpj_func_has_generic_rank(f) && (*ndim < 1 || *ndim > XPJ_MAX_RANK))
    return rt_err(XPJ_ERR_SPECIALIZE,
                  "kernel %s has generic-rank arrays ([*]): give ndim 1..%d "
                  "(given %u)",
                  name, XPJ_MAX_RANK, *ndim);
  if (!xpj_func_has_generic_rank(f))
    *ndim = 0; /* not part of the key: it changes nothing */
  *fp = f;
  return XPJ_OK;
}

/* get_binary the long way: the request resolved, specialised, keyed and
 * obtained through the caches. */
static xpj_status binary_slow(xpj_program *p, const char *name,
                              const char *dtypes, unsigned ndim,
                              const char *target, const xpj_compile_opts *opts,
                              rt_l1 **e) {
  xpj_target t;
  char err[256];
  if (rt_target_parse(p->ctx, target, &t, err, sizeof err) != XPJ_OK)
    return rt_err(XPJ_ERR_INVALID, "%s", err);
  char tstr[1200];
  xpj_target_str(&t, tstr, sizeof tstr);
  const xpj_func *f = NULL;
  xpj_scalar types[XPJ_MAX_TPARAMS];
  int64_t consts[XPJ_MAX_CPARAMS];
  char canon[256], ostr[64];
  xpj_compile_opts o;
  xpj_status st = resolve(p, name, dtypes, &ndim, opts, &f, types, consts,
                          canon, sizeof canon, &o, ostr, sizeof ostr);
  xpj_module *sm = NULL;
  xpj_kernel_origin from;
  /* a binary needs no signature: through its alias (no module), else
   * specialised */
  bool fell_back = false;
  rt_request rq = {{p->src, p->src_len, p->name}, NULL, name, canon, ndim,
                   NULL, &t, tstr, &o, ostr, src_id(p), &fell_back};
  if (st == XPJ_OK && rq.src_digest &&
      rt_cc_obtain(p->ctx, &rq, e, &from) == XPJ_OK)
    return XPJ_OK;
  if (st == XPJ_OK)
    st = specialise(p, f, types, consts, ndim, &sm);
  rq.sm = sm;
  if (st == XPJ_OK)
    st = rt_cc_obtain(p->ctx, &rq, e, &from);
  xpj_module_destroy(sm);
  return st;
}

xpj_status xpj_program_get_binary(xpj_program *p, const char *name,
                                  const char *dtypes, unsigned ndim,
                                  const char *target,
                                  const xpj_compile_opts *opts, void **data,
                                  size_t *size) {
  if (data)
    *data = NULL;
  if (size)
    *size = 0;
  if (!p || !name || !target)
    return rt_err(XPJ_ERR_INVALID, "xpj_program_get_binary: NULL argument");
  if (rt_inherited(p->ctx))
    return rt_err_inherited("xpj_program_get_binary", "program");
  /* asked before in this context, exactly so: the binary as it is (a
   * request that succeeded once succeeds again) */
  char nd[24], os[96];
  nd[xpj_dec(nd, ndim)] = 0;
  opts_text(opts, p->ctx->checks, os);
  const char *parts[] = {"binary", name, dtypes, nd, os, target};
  char qbuf[QKEY_BUF], *q = quick_key(p, parts, 6, qbuf);
  if (!q)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  rt_l1 *e = rt_cc_quick(p->ctx, q, NULL, NULL);
  xpj_status st = XPJ_OK;
  if (!e) {
    st = binary_slow(p, name, dtypes, ndim, target, opts, &e);
    if (st == XPJ_OK)
      rt_cc_remember(p->ctx, q, e, NULL);
  } else {
    rt_cc_note_l1(p->ctx);
  }
  quick_key_free(q, qbuf);
  if (st != XPJ_OK)
    return st;
  if (data) {
    if (!(*data = malloc(e->v.size ? e->v.size : 1)))
      return rt_err(XPJ_ERR_NOMEM, "out of memory");
    memcpy(*data, e->v.data, e->v.size);
  }
  if (size) /* (data NULL: the size alone, to allocate for it) */
    *size = e->v.size;
  return XPJ_OK;
}

xpj_status xpj_program_get_kernel(xpj_program *p, const char *name,
                                  const char *dtypes, unsigned ndim,
                                  xpj_device *dev,
                                  const xpj_compile_opts *opts,
                                  xpj_kernel **out) {
  if (!out)
    return rt_err(XPJ_ERR_INVALID, "xpj_program_get_kernel: out is NULL");
  *out = NULL;
  if (!p || !name || !dev)
    return rt_err(XPJ_ERR_INVALID, "xpj_program_get_kernel: NULL argument");
  if (rt_inherited(p->ctx))
    return rt_err_inherited("xpj_program_get_kernel", "program");
  if (dev->ctx != p->ctx)
    return rt_err(XPJ_ERR_INVALID,
                  "xpj_program_get_kernel: the device is not of the "
                  "program's context");
  /* asked exactly so before in this context: the request is not parsed
   * again, the kernel not specialised again */
  char nd[24], os[96];
  nd[xpj_dec(nd, ndim)] = 0;
  opts_text(opts, p->ctx->checks, os);
  const char *parts[] = {"kernel", name, dtypes, nd, os, dev->id};
  char qbuf[QKEY_BUF], *q = quick_key(p, parts, 6, qbuf);
  if (!q)
    return rt_err(XPJ_ERR_NOMEM, "out of memory");
  const rt_known *kn = NULL;
  rt_l1 *e = rt_cc_quick(p->ctx, q, dev, &kn);
  rt_asked a;
  const xpj_func *f = NULL;
  xpj_compile_opts o;
  xpj_scalar types[XPJ_MAX_TPARAMS];
  int64_t consts[XPJ_MAX_CPARAMS];
  xpj_status st = XPJ_OK;
  if (kn) { /* the canonical request, module and description: the context's */
    a = kn->asked;
    if (opts)
      o = *opts;
    else
      xpj_compile_opts_default(&o);
    o.checks |= p->ctx->checks;
  } else {
    a.ndim = ndim;
    st = resolve(p, name, dtypes, &a.ndim, opts, &f, types, consts, a.canon,
                 sizeof a.canon, &o, a.ostr, sizeof a.ostr);
  }
  xpj_kernel *k = NULL;
  if (st == XPJ_OK) {
    pthread_mutex_lock(&p->mu);
    k = find(p, name, a.canon, a.ndim, dev, a.ostr);
    pthread_mutex_unlock(&p->mu);
  }
  if (st != XPJ_OK || k) {
    quick_key_free(q, qbuf);
    *out = k;
    return st;
  }
  if (kn) {
    rt_cc_note_l1(p->ctx);
    st = (k = kernel_new(p, name, &a, dev))
             ? finish(k, kn, e, &o, &k)
             : rt_err(XPJ_ERR_NOMEM, "out of memory");
  } else {
    st = build(p, q, &a, f, types, consts, dev, &o, &k);
  }
  quick_key_free(q, qbuf);
  if (st != XPJ_OK)
    return st;
  pthread_mutex_lock(&p->mu);
  xpj_kernel *other = find(p, name, a.canon, a.ndim, dev, a.ostr);
  if (other) { /* another thread built it meanwhile: keep one */
    pthread_mutex_unlock(&p->mu);
    kernel_free(k);
    *out = other;
    return XPJ_OK;
  }
  k->next = p->list;
  p->list = k;
  pthread_mutex_unlock(&p->mu);
  *out = k;
  return XPJ_OK;
}

xpj_status xpj_kernel_get_info(const xpj_kernel *k, xpj_kernel_info *out) {
  if (!k || !out)
    return rt_err(XPJ_ERR_INVALID, "xpj_kernel_get_info: NULL argument");
  out->name = k->name;
  out->kind = k->desc.kind;
  out->dims = k->desc.dims;
  memcpy(out->reqd_local, k->desc.reqd_local, sizeof out->reqd_local);
  out->nargs = k->desc.nargs;
  out->local_mem_bytes = k->local_bytes;
  out->max_work_group_size = k->dev->info.max_work_group_size;
  out->compile_millis = k->compile_ms;
  out->target = k->target;
  out->origin = k->origin;
  return XPJ_OK;
}

xpj_status xpj_kernel_get_arg_info(const xpj_kernel *k, unsigned i,
                                   xpj_kernel_arg_info *out) {
  if (!k || !out)
    return rt_err(XPJ_ERR_INVALID, "xpj_kernel_get_arg_info: NULL argument");
  if (i >= k->desc.nargs)
    return rt_err(XPJ_ERR_INVALID, "kernel %s has %u argument%s: no "
                  "argument %u (they are counted from 0)", k->name, k->desc.nargs,
                  k->desc.nargs == 1 ? "" : "s", i);
  const rt_karg *a = &k->desc.args[i];
  *out = (xpj_kernel_arg_info){a->name, a->kind, a->dtype, a->rank,
                               a->is_const};
  return XPJ_OK;
}

const char *xpj_kernel_signature(const xpj_kernel *k) {
  return k ? rt_kernel_signature(k) : "";
}

/* ---- for xpjitd (daemon.h) ---- */

xpj_status rt_program_keyed(xpj_program *p, const char *name,
                            const char *dtypes, unsigned ndim,
                            const char *target, const xpj_compile_opts *opts,
                            rt_keyed *k) {
  memset(k, 0, sizeof *k);
  if (!p || !name || !target)
    return rt_err(XPJ_ERR_INVALID, "rt_program_keyed: NULL argument");
  char err[256];
  if (rt_target_parse(p->ctx, target, &k->t, err, sizeof err) != XPJ_OK)
    return rt_err(XPJ_ERR_INVALID, "%s", err);
  xpj_target_str(&k->t, k->tstr, sizeof k->tstr);
  const xpj_func *f = NULL;
  xpj_scalar types[XPJ_MAX_TPARAMS];
  int64_t consts[XPJ_MAX_CPARAMS];
  k->ndim = ndim;
  xpj_status st = resolve(p, name, dtypes, &k->ndim, opts, &f, types, consts,
                          k->canon, sizeof k->canon, &k->o, k->ostr,
                          sizeof k->ostr);
  if (st == XPJ_OK)
    st = specialise(p, f, types, consts, k->ndim, &k->sm);
  if (st == XPJ_OK)
    st = rt_cc_key(&p->ctx->cc,
                   &(rt_request){{p->src, p->src_len, p->name}, k->sm,
                                 xpj_func_name(f), k->canon, k->ndim, NULL,
                                 &k->t, k->tstr, &k->o, k->ostr, NULL, NULL},
                   k->code, k->digest, &k->key);
  if (st != XPJ_OK) {
    xpj_module_destroy(k->sm);
    k->sm = NULL;
  }
  return st;
}

void rt_keyed_free(rt_keyed *k) {
  if (k) {
    xpj_module_destroy(k->sm);
    k->sm = NULL;
  }
}
