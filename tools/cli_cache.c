/*
 * cli_cache.c - xpjit-cli cache ... and xpjit-cli bundle ...: inspect and
 * maintain the compile cache, and build, list, verify and import bundles
 * of precompiled kernels. Exit status: 0 success, 1 a problem found (bad
 * entries, compile errors, nothing matched), 2 usage errors.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_INPUT 1
#define EXIT_USAGE 2

/* ---- output helpers ----------------------------------------------------- */

void cli_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p == '\t')
      fputs("\\t", f);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

static void human_size(uint64_t b, char *buf, size_t n) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    i++;
  }
  if (i == 0)
    snprintf(buf, n, "%llu B", (unsigned long long)b);
  else
    snprintf(buf, n, "%.1f %s", v, u[i]);
}

static void human_age(int64_t ms_epoch, char *buf, size_t n) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  int64_t s = (now - ms_epoch) / 1000;
  if (s < 0)
    s = 0;
  if (s < 120)
    snprintf(buf, n, "%llds ago", (long long)s);
  else if (s < 7200)
    snprintf(buf, n, "%lldm ago", (long long)s / 60);
  else if (s < 172800)
    snprintf(buf, n, "%lldh ago", (long long)s / 3600);
  else
    snprintf(buf, n, "%lldd ago", (long long)s / 86400);
}

/* "cpu:znver4:+avx,..." -> "cpu:znver4"; others unchanged. */
static void short_target(const char *t, char *buf, size_t n) {
  snprintf(buf, n, "%s", t);
  if (!strncmp(buf, "cpu:", 4)) {
    char *c = strchr(buf + 4, ':');
    if (c)
      *c = 0;
  }
}

static void warn_cb(void *ud, const char *msg) {
  (void)ud;
  fprintf(stderr, "%s: warning: %s\n", cli_prog, msg);
}

/* ---- xpjit-cli cache ------------------------------------------------------- */

static void usage_cache(FILE *out) {
  fprintf(out,
          "usage: %s cache [--path DB] [--json] COMMAND\n"
          "\n"
          "commands:\n"
          "  stats                 hits and misses per level, compiles, time "
          "saved,\n"
          "                        entries and size\n"
          "  ls                    entries, most recently used first\n"
          "  show DIGEST [-o FILE] one entry (a digest prefix of 4+ hex "
          "digits);\n"
          "                        -o writes its binary\n"
          "  verify [--repair]     check the file and every entry's key and "
          "checksum\n"
          "  prune [--max-size N] [--older-than D]\n"
          "                        remove entries unused for D (90s, 30m, "
          "12h, 7d, 2w),\n"
          "                        then the least recently used beyond N "
          "(512M, 2G)\n"
          "  clear                 remove every entry and reset the "
          "statistics\n"
          "  export FILE           write the successful entries as a bundle\n"
          "\n"
          "The cache is XPJIT_CACHE_DIR/cache-v%d.db, else\n"
          "$XDG_CACHE_HOME/xpjit/cache-v%d.db, else "
          "~/.cache/xpjit/cache-v%d.db.\n"
          "Exit status: 0 success, 1 problems found, 2 usage errors.\n",
          cli_prog, XPJ_CACHE_SCHEMA_VERSION, XPJ_CACHE_SCHEMA_VERSION,
          XPJ_CACHE_SCHEMA_VERSION);
}

static void print_counters_json(FILE *f, const xpj_cache_counters *c) {
  const char *sep = "";
#define JSON_U(name) fprintf(f, "%s\"%s\": %llu", sep, #name, \
                             (unsigned long long)c->name);
#define JSON_D(name) fprintf(f, "%s\"%s\": %.3f", sep, #name, c->name);
#define JSON(kind, name, what) JSON_##kind(name) sep = ", ";
  XPJ_CACHE_COUNTERS(JSON)
#undef JSON
#undef JSON_D
#undef JSON_U
}

static const char *mode_name(xpj_cache_mode m) {
  switch (m) {
  case XPJ_CACHE_MODE_OFF: return "off";
  case XPJ_CACHE_MODE_RO: return "ro";
  case XPJ_CACHE_MODE_RW: return "rw";
  default: return "default";
  }
}

/* Exit status 1 when the cache is not in the mode it was opened for
 * (xpj_cache_problem says why): stats and ls must not look fine then. */
static int do_stats(xpj_cache *c, bool json) {
  xpj_cache_stats s;
  if (xpj_cache_get_stats(c, &s) != XPJ_OK) {
    fprintf(stderr, "%s cache stats: %s\n", cli_prog, xpj_cache_last_error());
    return EXIT_INPUT;
  }
  char problem[4600];
  int rc = xpj_cache_problem(c, problem, sizeof problem) ? EXIT_INPUT : 0;
  const xpj_cache_counters *k = &s.counters;
  if (json) {
    printf("{\"path\": ");
    cli_json_str(stdout, xpj_cache_path(c));
    printf(", \"mode\": \"%s\", ", mode_name(xpj_cache_mode_of(c)));
    if (rc) {
      printf("\"problem\": ");
      cli_json_str(stdout, problem);
      printf(", ");
    }
    printf("\"entries\": %llu, \"failed_entries\": %llu, "
           "\"bytes\": %llu, \"file_bytes\": %llu, \"max_size\": %llu, ",
           (unsigned long long)s.entries,
           (unsigned long long)s.failed_entries, (unsigned long long)s.bytes,
           (unsigned long long)s.file_bytes,
           (unsigned long long)s.max_size);
    print_counters_json(stdout, k);
    printf("}\n");
    return rc;
  }
  char b1[32], b2[32], b3[32];
  human_size(s.bytes, b1, sizeof b1);
  human_size(s.file_bytes, b2, sizeof b2);
  human_size(s.max_size, b3, sizeof b3);
  uint64_t lookups = k->l2_hits + k->l2_misses;
  printf("cache:            %s (%s)\n", xpj_cache_path(c),
         mode_name(xpj_cache_mode_of(c)));
  if (rc)
    printf("problem:          %s\n", problem);
  printf("entries:          %llu (%llu failed compiles)\n",
         (unsigned long long)s.entries, (unsigned long long)s.failed_entries);
  printf("size:             %s of %s limit (file %s)\n", b1,
         s.max_size == UINT64_MAX ? "no" : b3, b2);
  printf("first-level hits: %llu\n", (unsigned long long)k->l1_hits);
  printf("disk hits:        %llu of %llu lookups (%.1f%%)\n",
         (unsigned long long)k->l2_hits, (unsigned long long)lookups,
         lookups ? 100.0 * (double)k->l2_hits / (double)lookups : 0.0);
  printf("bundle hits:      %llu\n", (unsigned long long)k->bundle_hits);
  printf("daemon hits:      %llu (%llu times it could not serve)\n",
         (unsigned long long)k->daemon_hits,
         (unsigned long long)k->daemon_fallbacks);
  if (k->redis_hits + k->redis_misses + k->redis_errors + k->redis_skipped)
    printf("redis tier:       %llu hits, %llu misses, %llu stored, %llu "
           "refused, %llu errors, %llu skipped while down, %llu waits\n",
           (unsigned long long)k->redis_hits,
           (unsigned long long)k->redis_misses,
           (unsigned long long)k->redis_stores,
           (unsigned long long)k->redis_refused,
           (unsigned long long)k->redis_errors,
           (unsigned long long)k->redis_skipped,
           (unsigned long long)k->redis_waits);
  printf("device binaries:  %llu loaded, %llu stored\n",
         (unsigned long long)k->native_hits,
         (unsigned long long)k->native_stores);
  printf("compiles:         %llu (%llu failed), %.1f ms\n",
         (unsigned long long)k->compiles,
         (unsigned long long)k->compile_failures, k->compile_ms);
  printf("compile saved:    %.1f ms\n", k->saved_ms);
  printf("cached failures:  %llu served\n",
         (unsigned long long)k->failure_hits);
  printf("evictions:        %llu\n", (unsigned long long)k->evictions);
  printf("corrupt dropped:  %llu\n", (unsigned long long)k->corrupt);
  return rc;
}

typedef struct ls_ctx {
  bool json;
  unsigned n;
} ls_ctx;

static int ls_one(void *ud, const xpj_cache_entry *e) {
  ls_ctx *l = ud;
  if (l->json) {
    printf("%s{\"digest\": \"%s\", \"kernel\": ", l->n ? ",\n " : "",
           e->digest);
    cli_json_str(stdout, e->kernel);
    printf(", \"dtypes\": ");
    cli_json_str(stdout, e->dtypes);
    printf(", \"ndim\": %u, \"target\": ", e->ndim);
    cli_json_str(stdout, e->target);
    printf(", \"options\": ");
    cli_json_str(stdout, e->options);
    printf(", \"versions\": ");
    cli_json_str(stdout, e->versions);
    printf(", \"failed\": %s, \"size\": %zu, \"compile_ms\": %.3f, "
           "\"created_ms\": %lld, \"last_used_ms\": %lld, \"hits\": %llu, "
           "\"expires_ms\": %lld}",
           e->failed ? "true" : "false", e->size, e->compile_ms,
           (long long)e->created_ms, (long long)e->last_used_ms,
           (unsigned long long)e->hits, (long long)e->expires_ms);
  } else {
    if (!l->n)
      printf("%-16s  %-20s %-14s %-4s %-16s %-7s %10s %5s  %s\n", "DIGEST",
             "KERNEL", "DTYPES", "NDIM", "TARGET", "OPTS", "SIZE", "HITS",
             "LAST USED");
    char tg[48], sz[32], age[32];
    short_target(e->target, tg, sizeof tg);
    human_size(e->size, sz, sizeof sz);
    human_age(e->last_used_ms, age, sizeof age);
    printf("%.16s  %-20s %-14s %-4u %-16s %-7s %10s %5llu  %s%s\n", e->digest,
           e->kernel, *e->dtypes ? e->dtypes : "-", e->ndim, tg, e->options,
           sz, (unsigned long long)e->hits, age,
           e->failed ? "  (failed compile)" : "");
  }
  l->n++;
  return 0;
}

static int do_ls(xpj_cache *c, bool json) {
  ls_ctx l = {json, 0};
  if (json)
    printf("[");
  xpj_status st = xpj_cache_list(c, ls_one, &l);
  if (json)
    printf("]\n");
  else if (!l.n)
    printf("(no entries)\n");
  if (st != XPJ_OK) {
    fprintf(stderr, "%s: %s\n", cli_prog, xpj_cache_last_error());
    return EXIT_INPUT;
  }
  char problem[4600];
  if (xpj_cache_problem(c, problem, sizeof problem)) {
    fprintf(stderr, "%s: %s\n", cli_prog, problem);
    return EXIT_INPUT;
  }
  return 0;
}

static int do_show(xpj_cache *c, const char *digest, const char *outpath,
                   bool json) {
  xpj_cache_entry e;
  xpj_status st = xpj_cache_find(c, digest, &e);
  if (st != XPJ_OK) {
    fprintf(stderr, "%s: %s\n", cli_prog, xpj_cache_last_error());
    return st == XPJ_ERR_INVALID ? EXIT_USAGE : EXIT_INPUT;
  }
  if (json) {
    ls_ctx l = {true, 0};
    printf("[");
    ls_one(&l, &e);
    printf("]\n");
  } else {
    char sz[32], age[32];
    human_size(e.size, sz, sizeof sz);
    human_age(e.last_used_ms, age, sizeof age);
    printf("digest:     %s\n", e.digest);
    printf("kernel:     %s\n", e.kernel);
    printf("dtypes:     %s\n", *e.dtypes ? e.dtypes : "-");
    printf("ndim:       %u\n", e.ndim);
    printf("target:     %s\n", e.target);
    printf("options:    %s\n", e.options);
    printf("versions:   %s\n", e.versions);
    printf("code hash:  %s\n", e.code);
    printf("status:     %s\n", e.failed ? "failed compile" : "ok");
    printf("binary:     %s, entry point %s\n", sz, e.entry);
    printf("local mem:  %llu bytes; scratch %llu bytes per work-item\n",
           (unsigned long long)e.local_bytes,
           (unsigned long long)e.scratch_bytes);
    printf("compile:    %.1f ms\n", e.compile_ms);
    printf("used:       %llu hits, last %s\n", (unsigned long long)e.hits,
           age);
    if (e.expires_ms)
      printf("expires:    %lld (ms since the epoch)\n",
             (long long)e.expires_ms);
    printf("key:\n%s", e.key);
    if (*e.log)
      printf("log:\n%s\n", e.log);
  }
  int rc = 0;
  if (outpath) {
    FILE *f = fopen(outpath, "wb");
    if (!f || fwrite(e.data, 1, e.size, f) != e.size) {
      fprintf(stderr, "%s: cannot write %s\n", cli_prog, outpath);
      rc = EXIT_INPUT;
    }
    if (f && fclose(f) != 0)
      rc = EXIT_INPUT;
  }
  xpj_cache_entry_clear(&e);
  return rc;
}

static void verify_line(void *ud, const char *msg) {
  (void)ud;
  printf("bad: %s\n", msg);
}

static int do_verify(xpj_cache *c, bool repair, bool json,
                     const char *what) {
  uint64_t checked = 0, bad = 0;
  xpj_status st =
      xpj_cache_verify(c, repair, json ? NULL : verify_line, NULL, &checked,
                       &bad);
  if (st != XPJ_OK) {
    fprintf(stderr, "%s: %s\n", cli_prog, xpj_cache_last_error());
    return EXIT_INPUT;
  }
  if (json)
    printf("{\"checked\": %llu, \"bad\": %llu, \"repaired\": %s}\n",
           (unsigned long long)checked, (unsigned long long)bad,
           repair && bad ? "true" : "false");
  else
    printf("%s: %llu entries checked, %llu bad%s\n", what,
           (unsigned long long)checked, (unsigned long long)bad,
           repair && bad ? " (removed)" : "");
  return bad ? EXIT_INPUT : 0;
}

int cli_cache(int argc, char **argv) {
  const char *path = NULL, *sub = NULL, *arg = NULL, *outpath = NULL;
  bool json = false, repair = false;
  uint64_t max_size = 0;
  int64_t older = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage_cache(stdout);
      return 0;
    }
    if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--repair")) {
      repair = true;
    } else if (!strcmp(a, "--path") || !strcmp(a, "--max-size") ||
               !strcmp(a, "--older-than") || !strcmp(a, "-o")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "%s cache: option '%s' needs a value\n", cli_prog, a);
        return EXIT_USAGE;
      }
      const char *v = argv[++i];
      if (!strcmp(a, "--path")) {
        path = v;
      } else if (!strcmp(a, "-o")) {
        outpath = v;
      } else if (!strcmp(a, "--max-size")) {
        if (xpj_cache_parse_size(v, &max_size) != XPJ_OK || !max_size) {
          fprintf(stderr, "%s cache: --max-size: %s\n", cli_prog,
                  max_size ? xpj_cache_last_error() : "must be above 0");
          return EXIT_USAGE;
        }
      } else if (xpj_cache_parse_duration(v, &older) != XPJ_OK) {
        fprintf(stderr, "%s cache: --older-than: %s\n", cli_prog,
                xpj_cache_last_error());
        return EXIT_USAGE;
      }
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "%s cache: unknown option '%s'\n", cli_prog, a);
      return EXIT_USAGE;
    } else if (!sub) {
      sub = a;
    } else if (!arg) {
      arg = a;
    } else {
      fprintf(stderr, "%s cache: unexpected argument '%s'\n", cli_prog, a);
      return EXIT_USAGE;
    }
  }
  static const char *const subs[] = {"stats", "ls", "show", "verify",
                                     "prune", "clear", "export"};
  bool known = false;
  for (size_t i = 0; sub && i < sizeof subs / sizeof *subs; i++)
    known = known || !strcmp(sub, subs[i]);
  if (!known) {
    if (sub)
      fprintf(stderr, "%s cache: unknown command '%s'\n", cli_prog, sub);
    usage_cache(stderr);
    return EXIT_USAGE;
  }
  bool needs_arg = !strcmp(sub, "show") || !strcmp(sub, "export");
  if (needs_arg != (arg != NULL)) {
    fprintf(stderr, "%s cache %s: %s\n", cli_prog, sub,
            needs_arg ? "needs an argument" : "takes no argument");
    return EXIT_USAGE;
  }
  /* verify without --repair only looks: opened read-only, it reports a
   * damaged file instead of replacing it */
  bool writes = !strcmp(sub, "prune") || !strcmp(sub, "clear") ||
                (!strcmp(sub, "verify") && repair);
  xpj_cache_config cfg = {.path = path,
                          .mode = writes ? XPJ_CACHE_MODE_RW
                                  : !strcmp(sub, "verify")
                                      ? XPJ_CACHE_MODE_RO
                                      : XPJ_CACHE_MODE_DEFAULT,
                          .warn = warn_cb};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK) {
    fprintf(stderr, "%s cache: %s\n", cli_prog, xpj_cache_last_error());
    return EXIT_INPUT;
  }
  int rc = 0;
  if (!strcmp(sub, "stats")) {
    rc = do_stats(c, json);
  } else if (!strcmp(sub, "ls")) {
    rc = do_ls(c, json);
  } else if (!strcmp(sub, "show")) {
    rc = do_show(c, arg, outpath, json);
  } else if (!strcmp(sub, "verify")) {
    rc = do_verify(c, repair, json, xpj_cache_path(c));
  } else if (!strcmp(sub, "prune")) {
    uint64_t n = 0, freed = 0;
    if (xpj_cache_prune(c, max_size, older, &n, &freed) != XPJ_OK) {
      fprintf(stderr, "%s cache prune: %s\n", cli_prog,
              xpj_cache_last_error());
      rc = EXIT_INPUT;
    } else if (json) {
      printf("{\"removed\": %llu, \"freed\": %llu}\n",
             (unsigned long long)n, (unsigned long long)freed);
    } else {
      char b[32];
      human_size(freed, b, sizeof b);
      printf("removed %llu entries, %s\n", (unsigned long long)n, b);
    }
  } else if (!strcmp(sub, "clear")) {
    if (xpj_cache_clear(c) != XPJ_OK) {
      fprintf(stderr, "%s cache clear: %s\n", cli_prog,
              xpj_cache_last_error());
      rc = EXIT_INPUT;
    } else if (!json) {
      printf("cleared %s\n", xpj_cache_path(c));
    } else {
      printf("{\"cleared\": true}\n");
    }
  } else if (!strcmp(sub, "export")) {
    uint64_t n = 0;
    if (xpj_cache_export(c, arg, &n) != XPJ_OK) {
      fprintf(stderr, "%s cache export: %s\n", cli_prog,
              xpj_cache_last_error());
      rc = EXIT_INPUT;
    } else if (json) {
      printf("{\"exported\": %llu, \"bundle\": ", (unsigned long long)n);
      cli_json_str(stdout, arg);
      printf("}\n");
    } else {
      printf("exported %llu entries to %s\n", (unsigned long long)n, arg);
    }
  }
  xpj_cache_close(c);
  return rc;
}

/* ---- xpjit-cli bundle ------------------------------------------------------ */

static void usage_bundle(FILE *out) {
  fprintf(out,
          "usage: %s bundle build FILE... --dtype T=f32,f64 [--dtype U=...]\n"
          "          [--const N=16,32]... [--ndim 1,2,3] [--kernel NAME]...\n"
          "          --target TGT... [-O N]\n"
          "          [--fast-math] [-j N] [--keep-going] -o OUT.xpb\n"
          "       %s bundle ls FILE [--json]\n"
          "       %s bundle verify FILE [--json]\n"
          "       %s bundle import FILE... [--path DB]\n"
          "\n"
          "build   compiles every kernel of every FILE (or those named by\n"
          "        --kernel) for every combination of the --dtype lists (one\n"
          "        per type parameter), the --const lists (one per const\n"
          "        parameter: values such as 16, 0x10, -1, true; a kernel whose\n"
          "        type and const parameters are not all given is skipped),\n"
          "        --ndim values (kernels with [*]\n"
          "        arrays; default 1,2,3) and targets, in parallel, into one\n"
          "        bundle. --target: spirv, ptx:sm_80,sm_90, cpu (this "
          "machine),\n"
          "        cpu:x86-64, ... (repeatable).\n"
          "ls      the bundle's versions, targets and entries\n"
          "verify  every entry's key and checksum, and whether this xpjit "
          "can\n"
          "        use the bundle\n"
          "import  copies the bundle's entries into the cache\n"
          "\n"
          "Programs load bundles with xpj_context_add_bundle or\n"
          "XPJIT_BUNDLE_PATH=FILE_OR_DIR[:...].\n",
          cli_prog, cli_prog, cli_prog, cli_prog);
}

#define MAX_LIST 64

/* Removes a private directory of files (bundle build's cache). */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char p[4400];
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name) < (int)sizeof p)
      unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

typedef struct job {
  xpj_program *prog;
  const char *file;
  const char *kernel;
  char dtypes[256];
  unsigned ndim;
  char target[160];
  xpj_status st;
  char *msg;
} job;

typedef struct pool {
  job *jobs;
  size_t njobs, next, done, failed;
  const xpj_compile_opts *o;
  pthread_mutex_t mu;
  bool tty;
} pool;

static void progress(pool *p, const job *j) {
  if (!p->tty)
    return;
  const int W = 30;
  int fill = (int)(W * p->done / (p->njobs ? p->njobs : 1));
  fprintf(stderr, "\r[%.*s%*s] %zu/%zu %-40.40s", fill,
          "##############################", W - fill, "", p->done, p->njobs,
          j ? j->kernel : "");
  if (p->done == p->njobs)
    fputc('\n', stderr);
  fflush(stderr);
}

static void *worker(void *arg) {
  pool *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    if (p->next == p->njobs) {
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    job *j = &p->jobs[p->next++];
    pthread_mutex_unlock(&p->mu);
    j->st = xpj_program_get_binary(j->prog, j->kernel, j->dtypes, j->ndim,
                                   j->target, p->o, NULL, NULL);
    if (j->st != XPJ_OK)
      j->msg = strdup(xpj_last_error());
    pthread_mutex_lock(&p->mu);
    p->done++;
    p->failed += j->st != XPJ_OK;
    progress(p, j);
    pthread_mutex_unlock(&p->mu);
  }
}

/* Splits "a,b,c" into at most MAX_LIST items (modifies s). */
static unsigned split(char *s, char **items) {
  unsigned n = 0;
  for (char *save = NULL, *t = strtok_r(s, ",", &save); t && n < MAX_LIST;
       t = strtok_r(NULL, ",", &save))
    items[n++] = t;
  return n;
}

/* --dtype NAME=T1,T2 or --const NAME=V1,V2 */
typedef struct dtlist {
  char name[64];
  char *types[MAX_LIST]; /* types, or const values */
  unsigned n;
  char *buf;
  bool is_const;
} dtlist;

static int add_job(job **jobs, size_t *n, size_t *cap, const job *j) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 64;
    job *nj = realloc(*jobs, nc * sizeof *nj);
    if (!nj)
      return -1;
    *jobs = nj;
    *cap = nc;
  }
  (*jobs)[(*n)++] = *j;
  return 0;
}

static int bundle_build(int argc, char **argv) {
  const char *files[256], *kernels[64], *outpath = NULL;
  unsigned nfiles = 0, nkernels = 0, nd = 0, ntargets = 0, jobs_n = 0;
  dtlist dts[16];
  unsigned ndts = 0;
  unsigned ndims[8];
  char targets[MAX_LIST][160];
  bool keep_going = false;
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  int rc = EXIT_USAGE;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage_bundle(stdout);
      rc = 0;
      goto out;
    }
    if (strlen(a) == 3 && a[0] == '-' && a[1] == 'O' && a[2] >= '0' &&
        a[2] <= '3') {
      o.opt_level = (unsigned)(a[2] - '0');
      continue;
    }
    if (!strcmp(a, "--fast-math")) {
      o.fast_math = 1;
      continue;
    }
    if (!strcmp(a, "--keep-going")) {
      keep_going = true;
      continue;
    }
    if (!strcmp(a, "--dtype") || !strcmp(a, "--ndim") ||
        !strcmp(a, "--const") ||
        !strcmp(a, "--kernel") || !strcmp(a, "--target") ||
        !strcmp(a, "-o") || !strcmp(a, "-j")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "%s bundle build: option '%s' needs a value\n",
                cli_prog, a);
        goto out;
      }
      const char *v = argv[++i];
      if (!strcmp(a, "-o")) {
        outpath = v;
      } else if (!strcmp(a, "-j")) {
        char *end;
        long j = strtol(v, &end, 10);
        if (*end || j < 1 || j > 256) {
          fprintf(stderr, "%s bundle build: -j takes 1..256\n", cli_prog);
          goto out;
        }
        jobs_n = (unsigned)j;
      } else if (!strcmp(a, "--kernel")) {
        if (nkernels == 64) {
          fprintf(stderr, "%s bundle build: too many --kernel\n", cli_prog);
          goto out;
        }
        kernels[nkernels++] = v;
      } else if (!strcmp(a, "--dtype") || !strcmp(a, "--const")) {
        bool is_const = !strcmp(a, "--const");
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || eq - v >= 64 || !eq[1] || ndts == 16) {
          fprintf(stderr,
                  is_const ? "%s bundle build: --const takes NAME=V1,V2 "
                             "(e.g. TS=8,16), not '%s'\n"
                           : "%s bundle build: --dtype takes NAME=T1,T2 "
                             "(e.g. T=f32,f64), not '%s'\n",
                  cli_prog, v);
          goto out;
        }
        dtlist *d = &dts[ndts];
        memcpy(d->name, v, (size_t)(eq - v));
        d->name[eq - v] = 0;
        d->is_const = is_const;
        for (unsigned k = 0; k < ndts; k++)
          if (!strcmp(dts[k].name, d->name)) {
            fprintf(stderr, "%s bundle build: %s %s given twice\n",
                    cli_prog, a, d->name);
            goto out;
          }
        d->buf = strdup(eq + 1);
        if (!d->buf)
          goto out;
        ndts++;
        d->n = split(d->buf, d->types);
        for (unsigned k = 0; k < d->n; k++) {
          int64_t x;
          if (is_const &&
              xpj_const_parse(d->types[k], XPJ_I64, &x, NULL, 0) != XPJ_OK &&
              xpj_const_parse(d->types[k], XPJ_U64, &x, NULL, 0) != XPJ_OK &&
              xpj_const_parse(d->types[k], XPJ_BOOL, &x, NULL, 0) != XPJ_OK) {
            fprintf(stderr,
                    "%s bundle build: '%s' in --const %s is not an integer "
                    "(decimal or 0x hexadecimal, optional sign) or "
                    "true/false\n",
                    cli_prog, d->types[k], v);
            goto out;
          }
          if (!is_const && xpj_scalar_parse(d->types[k]) == XPJ_VOID) {
            fprintf(stderr,
                    "%s bundle build: unknown type '%s' in --dtype %s (use "
                    "bool, i8..i64, u8..u64, f16, bf16, f32 or f64; a const parameter "
                    "takes --const NAME=V1,V2)\n",
                    cli_prog, d->types[k], v);
            goto out;
          }
        }
      } else if (!strcmp(a, "--ndim")) {
        char buf[64], *items[MAX_LIST];
        snprintf(buf, sizeof buf, "%s", v);
        unsigned n = split(buf, items);
        nd = 0;
        for (unsigned k = 0; k < n; k++) {
          char *end;
          long x = strtol(items[k], &end, 10);
          if (*end || x < 1 || x > XPJ_MAX_RANK || nd == 8) {
            fprintf(stderr, "%s bundle build: --ndim takes 1..%d, not '%s'\n",
                    cli_prog, XPJ_MAX_RANK, items[k]);
            goto out;
          }
          ndims[nd++] = (unsigned)x;
        }
        if (!nd) {
          fprintf(stderr, "%s bundle build: --ndim is empty\n", cli_prog);
          goto out;
        }
      } else { /* --target: "ptx:sm_80,sm_90" -> ptx:sm_80, ptx:sm_90 */
        char buf[1200], *items[MAX_LIST];
        snprintf(buf, sizeof buf, "%s", v);
        unsigned n = split(buf, items);
        char kind[32] = "";
        const char *c = strchr(v, ':');
        if (c && (size_t)(c - v) < sizeof kind) {
          memcpy(kind, v, (size_t)(c - v));
          kind[c - v] = 0;
        }
        for (unsigned k = 0; k < n; k++) {
          if (ntargets == MAX_LIST) {
            fprintf(stderr, "%s bundle build: too many targets\n", cli_prog);
            goto out;
          }
          char *t = targets[ntargets];
          if (k > 0 && *kind && !strchr(items[k], ':'))
            snprintf(t, 160, "%s:%s", kind, items[k]);
          else
            snprintf(t, 160, "%s", items[k]);
          xpj_target pt;
          char err[256];
          if (xpj_target_parse(t, &pt, err, sizeof err) != XPJ_OK) {
            fprintf(stderr, "%s bundle build: --target %s: %s\n", cli_prog,
                    t, err);
            goto out;
          }
          ntargets++;
        }
      }
      continue;
    }
    if (a[0] == '-' && a[1]) {
      fprintf(stderr, "%s bundle build: unknown option '%s'\n", cli_prog, a);
      goto out;
    }
    if (nfiles == 256) {
      fprintf(stderr, "%s bundle build: too many files\n", cli_prog);
      goto out;
    }
    files[nfiles++] = a;
  }
  if (!nfiles || !ntargets || !outpath) {
    fprintf(stderr, "%s bundle build: needs FILE..., --target and -o "
            "(see --help)\n", cli_prog);
    goto out;
  }
  if (!nd) {
    ndims[0] = 1;
    ndims[1] = 2;
    ndims[2] = 3;
    nd = 3;
  }

  /* compile into a private cache in a new directory of our own (the cache
   * refuses shared directories such as /tmp), then export it */
  char tmpdir[4096], tmpdb[4200];
  const char *td = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/xpjit-bundle-XXXXXX",
           td && *td == '/' ? td : "/tmp");
  if (!mkdtemp(tmpdir)) {
    fprintf(stderr, "%s bundle build: cannot make a directory in %s: %s\n",
            cli_prog, td && *td == '/' ? td : "/tmp", strerror(errno));
    rc = EXIT_INPUT;
    goto out;
  }
  snprintf(tmpdb, sizeof tmpdb, "%s/build.db", tmpdir);
  xpj_context_desc desc = {.visible = "cpu",
                           .cpu_threads = 1,
                           .cache_mode = XPJ_CACHE_MODE_RW,
                           .cache_path = tmpdb,
                           .cache_max_size = UINT64_MAX,
                           .no_env_bundles = 1};
  xpj_context *ctx = NULL;
  if (xpj_context_create(&desc, &ctx) != XPJ_OK) {
    fprintf(stderr, "%s bundle build: %s\n", cli_prog, xpj_last_error());
    remove_dir(tmpdir);
    rc = EXIT_INPUT;
    goto out;
  }
  xpj_program *progs[256] = {0};
  job *jl = NULL;
  size_t njobs = 0, cap = 0;
  bool used_kernel[64] = {0};
  rc = 0;
  for (unsigned fi = 0; fi < nfiles && rc == 0; fi++) {
    if (xpj_program_create_file(ctx, files[fi], NULL, &progs[fi]) !=
        XPJ_OK) {
      fprintf(stderr, "%s\n", xpj_last_error());
      rc = EXIT_INPUT;
      break;
    }
    const xpj_module *m = xpj_program_module(progs[fi]);
    for (unsigned ki = 0; ki < xpj_program_kernel_count(progs[fi]); ki++) {
      const char *kn = xpj_program_kernel_name(progs[fi], ki);
      if (nkernels) {
        bool want = false;
        for (unsigned q = 0; q < nkernels; q++)
          if (!strcmp(kernels[q], kn))
            want = used_kernel[q] = true;
        if (!want)
          continue;
      }
      const xpj_func *f = xpj_module_find(m, kn);
      /* one list per type or const parameter, in declaration order */
      unsigned nt = xpj_func_generic_count(f);
      const dtlist *lists[XPJ_MAX_TPARAMS + XPJ_MAX_CPARAMS];
      bool ok = true;
      for (unsigned t = 0; t < nt && ok; t++) {
        int is_const = 0, gi = xpj_func_generic_at(f, t, &is_const);
        const char *pn = is_const ? xpj_func_const_name(f, (unsigned)gi)
                                  : xpj_func_tparam_name(f, (unsigned)gi);
        lists[t] = NULL;
        for (unsigned q = 0; q < ndts; q++)
          if (!strcmp(dts[q].name, pn) && dts[q].is_const == (is_const != 0))
            lists[t] = &dts[q];
        if (!lists[t]) {
          fprintf(stderr, "%s: skipping kernel %s: no %s for its %s "
                  "parameter %s\n", files[fi], kn,
                  is_const ? "--const" : "--dtype",
                  is_const ? "const" : "type", pn);
          ok = false;
        }
      }
      if (!ok)
        continue;
      bool generic = xpj_func_has_generic_rank(f);
      unsigned idx[XPJ_MAX_TPARAMS + XPJ_MAX_CPARAMS] = {0};
      for (;;) { /* every combination of dtypes */
        job j = {.prog = progs[fi], .file = files[fi], .kernel = kn};
        size_t len = 0;
        for (unsigned t = 0; t < nt; t++)
          len += (size_t)snprintf(j.dtypes + len, sizeof j.dtypes - len,
                                  "%s%s=%s", t ? "," : "", lists[t]->name,
                                  lists[t]->types[idx[t]]);
        for (unsigned di = 0; di < (generic ? nd : 1); di++)
          for (unsigned ti = 0; ti < ntargets; ti++) {
            j.ndim = generic ? ndims[di] : 0;
            memcpy(j.target, targets[ti], sizeof j.target);
            if (add_job(&jl, &njobs, &cap, &j) != 0)
              rc = EXIT_INPUT;
          }
        unsigned t = 0;
        while (t < nt && ++idx[t] == lists[t]->n)
          idx[t++] = 0;
        if (t == nt)
          break;
      }
    }
  }
  for (unsigned q = 0; q < nkernels && rc == 0; q++)
    if (!used_kernel[q]) {
      fprintf(stderr, "%s bundle build: no kernel named '%s' in the files\n",
              cli_prog, kernels[q]);
      rc = EXIT_INPUT;
    }
  if (rc == 0 && !njobs) {
    fprintf(stderr, "%s bundle build: nothing to compile (give --dtype for "
            "the kernels' type parameters and --const for their const "
            "parameters)\n", cli_prog);
    rc = EXIT_INPUT;
  }
  if (rc == 0) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned nthreads = jobs_n ? jobs_n : (unsigned)(ncpu > 0 ? ncpu : 1);
    if (nthreads > njobs)
      nthreads = (unsigned)njobs;
#if defined(__SANITIZE_ADDRESS__)
    /* GCC 12's libasan takes no lock around fork(): a compile worker forked
     * while another thread allocates can inherit a held allocator lock and
     * hang until its timeout (docs/testing.md). Sanitizer builds compile
     * one at a time. */
    nthreads = 1;
#endif
    pool p = {jl, njobs, 0, 0, 0, &o, PTHREAD_MUTEX_INITIALIZER,
              isatty(2) != 0};
    pthread_t th[256];
    unsigned started = 0;
    for (; started < nthreads; started++)
      if (pthread_create(&th[started], NULL, worker, &p) != 0)
        break;
    if (!started)
      worker(&p);
    for (unsigned t = 0; t < started; t++)
      pthread_join(th[t], NULL);
    /* a dtype a kernel does not accept (popcount of f64) is not an error
     * of the build: that combination does not exist */
    size_t skipped = 0, failed = 0;
    for (size_t q = 0; q < njobs; q++) {
      if (jl[q].st == XPJ_OK)
        continue;
      if (jl[q].st == XPJ_ERR_SPECIALIZE) {
        if (skipped++ < 3) {
          const char *m = jl[q].msg ? jl[q].msg : "";
          const char *nl = strchr(m, '\n');
          fprintf(stderr, "note: skipped %s [%s] ndim=%u: %.*s\n",
                  jl[q].kernel, jl[q].dtypes, jl[q].ndim,
                  nl ? (int)(nl - m) : (int)strlen(m), m);
        }
        continue;
      }
      failed++;
      fprintf(stderr, "error: %s: %s [%s] ndim=%u for %s: %s\n", jl[q].file,
              jl[q].kernel, jl[q].dtypes, jl[q].ndim, jl[q].target,
              jl[q].msg ? jl[q].msg : "failed");
    }
    if (skipped > 3)
      fprintf(stderr, "note: ... %zu combinations skipped in all (the "
              "kernels do not accept those dtypes)\n", skipped);
    p.failed = failed;
    if (failed && !keep_going)
      rc = EXIT_INPUT;
    uint64_t n = 0;
    if (rc == 0 && xpj_cache_export(xpj_context_cache(ctx), outpath, &n) !=
                       XPJ_OK) {
      fprintf(stderr, "%s bundle build: %s\n", cli_prog,
              xpj_cache_last_error());
      rc = EXIT_INPUT;
    }
    if (rc == 0)
      fprintf(stderr, "%s: %llu kernels (%zu compiled, %zu failed, %zu "
              "skipped)\n", outpath, (unsigned long long)n,
              njobs - p.failed - skipped, p.failed, skipped);
    else
      fprintf(stderr, "%s bundle build: %zu of %zu compiles failed; %s not "
              "written (--keep-going writes the rest)\n", cli_prog, p.failed,
              njobs, outpath);
  }
  for (size_t q = 0; q < njobs; q++)
    free(jl[q].msg);
  free(jl);
  for (unsigned fi = 0; fi < nfiles; fi++)
    xpj_program_destroy(progs[fi]);
  xpj_context_destroy(ctx);
  remove_dir(tmpdir);
out:
  for (unsigned k = 0; k < ndts; k++)
    free(dts[k].buf);
  return rc;
}

static int bundle_ls_verify(const char *path, bool verify, bool json) {
  xpj_cache_config cfg = {.path = path, .bundle = 1, .warn = warn_cb};
  xpj_cache *b = NULL;
  if (xpj_cache_open(&cfg, &b) != XPJ_OK) {
    fprintf(stderr, "%s bundle: %s\n", cli_prog, xpj_cache_last_error());
    return EXIT_INPUT;
  }
  char *versions = NULL, *targets = NULL;
  xpj_cache_get_meta(b, "versions", &versions);
  xpj_cache_get_meta(b, "targets", &targets);
  char mine[128];
  xpj_versions_str(mine, sizeof mine);
  bool usable = versions && !strcmp(versions, mine);
  int rc = 0;
  if (verify) {
    if (!json)
      printf("%s: built by %s%s\n", path, versions ? versions : "(unknown)",
             usable ? " (matches this xpjit)" : "");
    rc = do_verify(b, false, json, path);
    if (!usable) {
      fprintf(stderr, "%s: not usable by this xpjit (%s)\n", path, mine);
      rc = EXIT_INPUT;
    }
  } else if (json) {
    printf("{\"path\": ");
    cli_json_str(stdout, path);
    printf(", \"versions\": ");
    cli_json_str(stdout, versions);
    printf(", \"usable\": %s, \"targets\": ", usable ? "true" : "false");
    cli_json_str(stdout, targets);
    printf(", \"entries\": ");
    rc = do_ls(b, true);
    printf("}\n");
  } else {
    printf("bundle:   %s\n", path);
    printf("built by: %s%s\n", versions ? versions : "(unknown)",
           usable ? "" : "  (NOT usable by this xpjit)");
    printf("targets:\n");
    for (char *t = targets, *e; t && *t; t = e ? e + 1 : t + strlen(t)) {
      e = strchr(t, '\n');
      char tg[160];
      size_t L = e ? (size_t)(e - t) : strlen(t);
      if (L >= sizeof tg)
        L = sizeof tg - 1;
      memcpy(tg, t, L);
      tg[L] = 0;
      char sh[48];
      short_target(tg, sh, sizeof sh);
      printf("  %s\n", sh);
    }
    rc = do_ls(b, false);
  }
  free(versions);
  free(targets);
  xpj_cache_close(b);
  return rc;
}

int cli_bundle(int argc, char **argv) {
  if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
    usage_bundle(argc < 1 ? stderr : stdout);
    return argc < 1 ? EXIT_USAGE : 0;
  }
  const char *sub = argv[0];
  if (!strcmp(sub, "build"))
    return bundle_build(argc - 1, argv + 1);
  if (strcmp(sub, "ls") && strcmp(sub, "verify") && strcmp(sub, "import")) {
    fprintf(stderr, "%s bundle: unknown command '%s'\n", cli_prog, sub);
    usage_bundle(stderr);
    return EXIT_USAGE;
  }
  bool json = false;
  const char *path = NULL, *files[256];
  unsigned nfiles = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage_bundle(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strcmp(argv[i], "--path") && i + 1 < argc) {
      path = argv[++i];
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "%s bundle %s: unknown option '%s'\n", cli_prog, sub,
              argv[i]);
      return EXIT_USAGE;
    } else if (nfiles < 256) {
      files[nfiles++] = argv[i];
    }
  }
  if (!nfiles || (strcmp(sub, "import") && nfiles != 1)) {
    fprintf(stderr, "%s bundle %s: needs %s\n", cli_prog, sub,
            strcmp(sub, "import") ? "one FILE" : "FILE...");
    return EXIT_USAGE;
  }
  if (strcmp(sub, "import"))
    return bundle_ls_verify(files[0], !strcmp(sub, "verify"), json);
  xpj_cache_config cfg = {.path = path, .mode = XPJ_CACHE_MODE_RW,
                          .warn = warn_cb};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&cfg, &c) != XPJ_OK) {
    fprintf(stderr, "%s bundle import: %s\n", cli_prog,
            xpj_cache_last_error());
    return EXIT_INPUT;
  }
  int rc = 0;
  for (unsigned i = 0; i < nfiles; i++) {
    uint64_t imp = 0, skip = 0;
    if (xpj_cache_import(c, files[i], &imp, &skip) != XPJ_OK) {
      fprintf(stderr, "%s bundle import: %s\n", cli_prog,
              xpj_cache_last_error());
      rc = EXIT_INPUT;
      continue;
    }
    printf("%s: imported %llu entries into %s (%llu already there or "
           "damaged)\n", files[i], (unsigned long long)imp,
           xpj_cache_path(c), (unsigned long long)skip);
  }
  xpj_cache_close(c);
  return rc;
}
