/*
 * fuzz_cache_file.c - libFuzzer target for the compile cache's files: the
 * input is the contents of a database file, as a bundle handed to us or a
 * user cache found on disk (include/xpjit_cache.h).
 *
 * The bytes are written to a temporary file, which is then
 *   - opened as a bundle (read-only): either an error with a message, or a
 *     handle that lists, verifies, finds "abcd", looks up a fixed key, and
 *     reports its statistics, targets and meta data;
 *   - imported into a scratch cache: either an error with a message, or
 *     every row it copied verifies in the scratch cache (an import checks
 *     each row, so nothing damaged may get in);
 *   - opened as the user cache (read-write): never an error (damage is
 *     recovered or degrades the cache, with a warning), and the same calls
 *     plus a put and a get.
 * Nothing may crash or leak; every file made is removed, with the
 * directory ($TMPDIR, else /tmp) at exit.
 */
#include "xpjit_cache.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[PATH_MAX - 64];
static char path[PATH_MAX], scratch[PATH_MAX];

/* Everything in d, directories too: the cache's files and those beside
 * them (the .hits, .stats and .flight directories, .corrupt copies), so
 * that no input sees what another left and nothing stays at exit. */
static void empty_dir(const char *d) {
  DIR *dp = opendir(d);
  struct dirent *e;
  while (dp && (e = readdir(dp))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", d, e->d_name);
    struct stat sb;
    if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
      empty_dir(p);
      rmdir(p);
    } else {
      unlink(p);
    }
  }
  if (dp)
    closedir(dp);
}

static void at_exit(void) {
  empty_dir(dir);
  rmdir(dir);
}

static int init(void) {
  if (dir[0])
    return 0;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/xpjit-fuzz-cache-XXXXXX",
           tmp && *tmp == '/' && strlen(tmp) < sizeof dir - 32 ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    dir[0] = 0;
    return -1;
  }
  snprintf(path, sizeof path, "%s/in.db", dir);
  snprintf(scratch, sizeof scratch, "%s/scratch.db", dir);
  atexit(at_exit);
  return 0;
}

static void on_warn(void *ud, const char *msg) {
  if (!msg || !*msg)
    abort(); /* a warning says something */
  ++*(unsigned *)ud;
}

static void on_problem(void *ud, const char *problem) {
  if (!problem || !*problem)
    abort();
  ++*(unsigned *)ud;
}

static int on_entry(void *ud, const xpj_cache_entry *e) {
  if (!e->key || !e->kernel || !e->target || !e->versions || !e->entry ||
      !e->log || e->data || strlen(e->digest) > 64)
    abort();
  return ++*(unsigned *)ud > 1000; /* enough */
}

static const xpj_cache_key fixed_key = {
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "k",
    "T=f32",
    0,
    "cpu:x86_64",
    "O2",
    "xpjit=0.1.0;llvm=22.1.8;abi=3"};

/* The read calls every kind of handle supports. */
static void exercise(xpj_cache *c) {
  unsigned n = 0;
  (void)xpj_cache_list(c, on_entry, &n);
  uint64_t checked = 0, bad = 0;
  if (xpj_cache_verify(c, 0, on_problem, &n, &checked, &bad) == XPJ_OK &&
      bad > checked + 1)
    abort();
  xpj_cache_entry e;
  if (xpj_cache_find(c, "abcd", &e) == XPJ_OK) {
    if (strncmp(e.digest, "abcd", 4) != 0)
      abort();
    xpj_cache_entry_clear(&e);
  }
  if (xpj_cache_get(c, &fixed_key, &e) == XPJ_OK) {
    if (!e.key || !e.data)
      abort();
    xpj_cache_entry_clear(&e);
  } else if (e.key || e.data) {
    abort(); /* a miss leaves the entry empty */
  }
  xpj_cache_stats st;
  (void)xpj_cache_get_stats(c, &st);
  char *targets = NULL, *versions = NULL;
  if (xpj_cache_targets(c, &targets, &versions) == XPJ_OK) {
    free(targets);
    free(versions);
  }
  char *v = NULL;
  if (xpj_cache_get_meta(c, "kind", &v) == XPJ_OK)
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (init() != 0)
    return 0;
  empty_dir(dir);
  FILE *fp = fopen(path, "wb");
  if (!fp)
    return 0;
  if (size && fwrite(data, 1, size, fp) != size) {
    fclose(fp);
    return 0;
  }
  if (fclose(fp) != 0)
    return 0;
  chmod(path, 0600); /* whatever the umask: the cache refuses files others
                        may write */
  unsigned warnings = 0;

  /* a bundle */
  xpj_cache_config bc = {
      .path = path, .bundle = 1, .warn = on_warn, .warn_ud = &warnings};
  xpj_cache *b = NULL;
  xpj_status st = xpj_cache_open(&bc, &b);
  if ((st == XPJ_OK) != (b != NULL))
    abort();
  if (st != XPJ_OK && !xpj_cache_last_error()[0])
    abort();
  if (b) {
    if (xpj_cache_mode_of(b) != XPJ_CACHE_MODE_RO)
      abort();
    exercise(b);
    xpj_cache_close(b);
  }

  /* imported into a scratch cache */
  xpj_cache_config sc = {.path = scratch,
                         .mode = XPJ_CACHE_MODE_RW,
                         .max_size = UINT64_MAX,
                         .warn = on_warn,
                         .warn_ud = &warnings};
  xpj_cache *s = NULL;
  if (xpj_cache_open(&sc, &s) != XPJ_OK)
    abort();
  uint64_t imported = 0, skipped = 0;
  st = xpj_cache_import(s, path, &imported, &skipped);
  if (st != XPJ_OK && !xpj_cache_last_error()[0])
    abort();
  if (xpj_cache_mode_of(s) == XPJ_CACHE_MODE_RW) {
    uint64_t checked = 0, bad = 0;
    if (xpj_cache_verify(s, 0, NULL, NULL, &checked, &bad) != XPJ_OK ||
        bad != 0 || (st == XPJ_OK && checked != imported))
      abort();
  }
  xpj_cache_close(s);

  /* the user cache */
  xpj_cache_config uc = {.path = path,
                         .mode = XPJ_CACHE_MODE_RW,
                         .max_size = 1 << 20,
                         .warn = on_warn,
                         .warn_ud = &warnings};
  xpj_cache *c = NULL;
  if (xpj_cache_open(&uc, &c) != XPJ_OK || !c)
    abort(); /* never an error: recovered or degraded */
  exercise(c);
  static const uint8_t bin[] = {0x7f, 'E', 'L', 'F', 0, 1, 2, 3};
  xpj_cache_value v = {0, bin, sizeof bin, "k", "", 0, 0, 1.0, 0};
  if (xpj_cache_put(c, &fixed_key, &v) != XPJ_OK)
    abort(); /* a put never fails for the store's sake */
  xpj_cache_entry e;
  if (xpj_cache_get(c, &fixed_key, &e) == XPJ_OK) {
    if (e.size != sizeof bin || memcmp(e.data, bin, sizeof bin) != 0)
      abort(); /* what is served is what was stored */
    xpj_cache_entry_clear(&e);
  }
  exercise(c);
  xpj_cache_close(c);
  empty_dir(dir);
  return 0;
}
