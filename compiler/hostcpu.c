/*
 * hostcpu.c - the host CPU as LLVM names it (the target "cpu"), without
 * loading LLVM in every process.
 *
 * The CPU device's target, and with it every CPU kernel's cache key, is
 * LLVM's name and feature list of the host (LLVMGetHostCPUName and
 * LLVMGetHostCPUFeatures). LLVM computes both from CPUID and XGETBV alone
 * on x86-64, so its answer is a function of what those instructions say:
 * the first process asks LLVM and keeps the answer in the cache directory
 * (that of the cache of the context that asks: its descriptor's
 * cache_path, else the default; written only when that cache is
 * read-write, xpj_cache_config_mode) under a digest of every CPUID leaf
 * LLVM 22 reads (and more), XGETBV's XCR0, and the versions of LLVM and
 * xpjit; a later process with the same digest reads the file instead of
 * loading LLVM (docs/api.md, "Where LLVM is loaded"). A machine with another CPU, a home directory shared by
 * nodes of different CPUs, a new LLVM: another digest, another file. The
 * file is trusted as the cache is (cache/trust.c): the user's own, in the
 * user's own directory, and its text is checked before use. Other hosts
 * ask LLVM every time.
 */
#define _GNU_SOURCE
#include "llvm.h"

#include "../cache/hitfile.h" /* xpj_l2_fsize_block */
#include "../cache/trust.h"
#include "xpjit_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <llvm/Config/llvm-config.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 36)
#include <sys/platform/x86.h> /* glibc's copy of the CPUID leaves */
#define HAVE_GLIBC_LEAVES 1
#endif
#endif

#define NAME_MAX_LEN 64
#define FEAT_MAX_LEN 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool known;
static char host_name[NAME_MAX_LEN], host_feat[FEAT_MAX_LEN];

/* LLVM's names of CPUs and features: letters, digits, - _ . (and, in the
 * feature list, + and ,). */
static bool plain(const char *s, const char *extra) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || strchr("-_.", *s) ||
          (extra && strchr(extra, *s))))
      return false;
  return true;
}

int xpj_host_cpu_parse(const char *text, size_t n, char name[64],
                       char features[4096]) {
  char buf[NAME_MAX_LEN + FEAT_MAX_LEN + 4];
  if (n == 0 || n >= sizeof buf || text[n - 1] != '\n' ||
      memchr(text, 0, n))
    return -1;
  memcpy(buf, text, n - 1);
  buf[n - 1] = 0;
  char *nl = strchr(buf, '\n');
  if (!nl)
    return -1;
  *nl = 0;
  const char *feat = nl + 1;
  /* no empty item in the list (a leading, trailing or doubled comma):
   * not what this file is written with, and not what xpj_target_parse
   * keeps (it drops them) */
  size_t fl = strlen(feat);
  if (strlen(buf) >= NAME_MAX_LEN || fl >= FEAT_MAX_LEN ||
      !plain(buf, NULL) || !plain(feat, "+,") || feat[0] == ',' ||
      feat[fl - 1] == ',' || strstr(feat, ",,"))
    return -1;
  memcpy(name, buf, strlen(buf) + 1);
  memcpy(features, feat, strlen(feat) + 1);
  return 0;
}

#if defined(__x86_64__)
/* XCR0: the register state the OS saves (SSE, AVX, AVX-512's), what LLVM
 * and the psABI levels check besides CPUID; 0 without OSXSAVE (bit 27 of
 * leaf 1's ECX, which the caller has read). */
static uint64_t os_xsave_features(unsigned leaf1_ecx) {
  if (!(leaf1_ecx & (1u << 27))) /* OSXSAVE */
    return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t)hi << 32 | lo;
}

/* Leaf (leaf, sub) as glibc read it when the process started (into r), for
 * the leaves it keeps: no trap to the hypervisor. Only for the vendors
 * glibc reads them all for (vendor_ok: leaf 0 named one, glibc_vendor), and
 * only while its leaf 1 is there (it is not for others). */
static bool glibc_leaf(unsigned leaf, unsigned sub, bool vendor_ok,
                       unsigned r[4]) {
#ifdef HAVE_GLIBC_LEAVES
  static const struct {
    unsigned leaf, sub, index;
  } kept[] = {
      {1, 0, CPUID_INDEX_1},
      {7, 0, CPUID_INDEX_7},
      {7, 1, CPUID_INDEX_7_ECX_1},
      {0xd, 1, CPUID_INDEX_D_ECX_1},
      {0x14, 0, CPUID_INDEX_14_ECX_0},
      {0x19, 0, CPUID_INDEX_19},
      {0x80000001, 0, CPUID_INDEX_80000001},
      {0x80000008, 0, CPUID_INDEX_80000008},
  };
  const struct cpuid_feature *one;
  if (!vendor_ok || !(one = __x86_get_cpuid_feature_leaf(CPUID_INDEX_1)) ||
      !one->cpuid_array[0])
    return false;
  for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
    if (kept[i].leaf == leaf && kept[i].sub == sub) {
      const struct cpuid_feature *f =
          __x86_get_cpuid_feature_leaf(kept[i].index);
      if (!f)
        return false;
      memcpy(r, f->cpuid_array, sizeof f->cpuid_array);
      return true;
    }
#else
  (void)leaf;
  (void)sub;
  (void)vendor_ok;
  (void)r;
#endif
  return false;
}

/* Whether glibc reads every leaf glibc_leaf takes for the vendor of leaf
 * 0 (EBX, EDX, ECX: the 12 bytes of its name): Intel, AMD, Hygon,
 * Centaur, Zhaoxin (glibc's init_cpu_features) */
static bool glibc_vendor(const unsigned r[4]) {
  static const char *const names[] = {"GenuineIntel", "AuthenticAMD",
                                      "HygonGenuine", "CentaurHauls",
                                      "  Shanghai  "};
  char v[12];
  memcpy(v, &r[1], 4);
  memcpy(v + 4, &r[3], 4);
  memcpy(v + 8, &r[2], 4);
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!memcmp(v, names[i], 12))
      return true;
  return false;
}

/* The digest of what this CPU says: every leaf LLVM 22's Host.cpp reads
 * to name the CPU and list its features (0, 1, 7.0, 7.1, 0xd.1, 0x14,
 * 0x19, 0x24, 0x80000000, 0x80000001, 0x80000008; the answer is a function
 * of these and XCR0, so nothing else can change it), less what differs
 * between the cores of one machine (leaf 1 EBX: APIC id, CLFLUSH count;
 * 0x80000008 ECX: core count); XCR0 (what the OS saves); the versions.
 * Each CPUID is a trap to the hypervisor in a virtual machine (about 5 us
 * on this project's VMs, and every process start computes this): the
 * leaves are read once each, the highest ones from leaves 0 and
 * 0x80000000 as they are read, OSXSAVE from leaf 1, and those glibc read
 * at the process's start are taken from it (glibc_leaf: 2 of the 11
 * trap on this machine: 25-35 us instead of 50-70 in a new process). */
void xpj_host_cpu_fingerprint(char hex[33], bool glibc) {
  static const struct {
    unsigned leaf, sub;
    unsigned mask[4]; /* eax, ebx, ecx, edx kept */
  } leaves[] = {
      {0, 0, {~0u, ~0u, ~0u, ~0u}},
      {1, 0, {~0u, 0, ~0u, ~0u}},
      {7, 0, {~0u, ~0u, ~0u, ~0u}},
      {7, 1, {~0u, ~0u, ~0u, ~0u}},
      {0xd, 1, {~0u, 0, ~0u, ~0u}},
      {0x14, 0, {~0u, ~0u, ~0u, ~0u}},
      {0x19, 0, {~0u, ~0u, ~0u, ~0u}},
      {0x24, 0, {~0u, ~0u, ~0u, ~0u}},
      {0x80000000, 0, {~0u, ~0u, ~0u, ~0u}},
      {0x80000001, 0, {~0u, ~0u, ~0u, ~0u}},
      {0x80000008, 0, {~0u, ~0u, 0, ~0u}},
  };
  struct sha256_ctx h;
  sha256_init(&h);
  unsigned max = 0, maxx = 0, leaf1_ecx = 0;
  bool vendor_ok = false; /* a vendor whose leaves glibc keeps */
  for (size_t i = 0; i < sizeof leaves / sizeof *leaves; i++) {
    unsigned r[4] = {0, 0, 0, 0};
    unsigned leaf = leaves[i].leaf;
    /* leaves 0 and 0x80000000 are always read: they say what else is;
     * glibc's copy where it has one (what CPUID said at this process's
     * start: 8 of the 11 leaves here, 5.3 us each on this project's VM) */
    if ((leaf == 0 || leaf == 0x80000000 ||
         leaf <= (leaf >= 0x80000000 ? maxx : max)) &&
        !(glibc && glibc_leaf(leaf, leaves[i].sub, vendor_ok, r)))
      __cpuid_count(leaf, leaves[i].sub, r[0], r[1], r[2], r[3]);
    if (leaf == 0) {
      max = r[0];
      vendor_ok = glibc_vendor(r);
    } else if (leaf == 0x80000000)
      maxx = r[0] >= 0x80000000 ? r[0] : 0;
    else if (leaf == 1)
      leaf1_ecx = r[2];
    for (int k = 0; k < 4; k++)
      r[k] &= leaves[i].mask[k];
    sha256_update(&h, sizeof r, (const uint8_t *)r);
  }
  uint64_t xcr0 = os_xsave_features(leaf1_ecx);
  sha256_update(&h, sizeof xcr0, (const uint8_t *)&xcr0);
  static const char versions[] = "llvm " LLVM_VERSION_STRING " xpjit "
                                 XPJ_BUILD_ID;
  sha256_update(&h, sizeof versions, (const uint8_t *)versions);
  uint8_t dg[SHA256_DIGEST_SIZE];
  sha256_digest(&h, sizeof dg, dg);
  for (int i = 0; i < 16; i++)
    snprintf(hex + 2 * i, 3, "%02x", dg[i]);
}

/* The file's path, and its directory: cache's (NULL: the default one). */
static bool memo_path(const xpj_cache_config *cache, char *path, size_t size,
                      char *dir, size_t dsize) {
  char db[PATH_MAX], fp[33];
  size_t n = cache && cache->path
                 ? (size_t)snprintf(db, sizeof db, "%s", cache->path)
                 : xpj_cache_default_path(db, sizeof db);
  if (n >= sizeof db)
    return false;
  char *slash = strrchr(db, '/');
  if (!slash) /* a relative name: the working directory's */
    snprintf(db, sizeof db, ".");
  else if (slash == db)
    return false;
  else
    *slash = 0;
  xpj_host_cpu_fingerprint(fp, true);
  int k = snprintf(path, size, "%s/host-cpu-%s", db, fp);
  int l = snprintf(dir, dsize, "%s", db);
  return k > 0 && (size_t)k < size && l > 0 && (size_t)l < dsize;
}

/* "NAME\nFEATURES\n", the user's own, in a directory the cache trusts. */
static bool memo_read(const char *path, const char *dir,
                      char name[NAME_MAX_LEN], char feat_out[FEAT_MAX_LEN]) {
  trust t;
  trust_for_cache(&t);
  char why[512], real[PATH_MAX];
  if (!realpath(dir, real) || trust_dirs(&t, real, why, sizeof why) != TRUST_OK)
    return false;
  /* O_NONBLOCK: a FIFO put here must not block the open (trust_fd then
   * refuses what is not a regular file) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return false;
  char buf[NAME_MAX_LEN + FEAT_MAX_LEN + 4];
  ssize_t n = -1;
  if (trust_fd(&t, fd, path, false, why, sizeof why) == TRUST_OK)
    n = read(fd, buf, sizeof buf);
  close(fd);
  return n > 0 && xpj_host_cpu_parse(buf, (size_t)n, name, feat_out) == 0;
}

/* Best effort: a new file beside the cache's, renamed into place. */
static void memo_write(const char *path, const char *dir) {
  trust t;
  trust_for_cache(&t);
  char why[512], real[PATH_MAX];
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return;
  if (!realpath(dir, real) || trust_dirs(&t, real, why, sizeof why) != TRUST_OK)
    return;
  char tmp[PATH_MAX];
  int k = snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
  if (k <= 0 || (size_t)k >= sizeof tmp)
    return;
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0)
    return;
  size_t nl = strlen(host_name), fl = strlen(host_feat);
  char buf[NAME_MAX_LEN + FEAT_MAX_LEN + 4];
  memcpy(buf, host_name, nl);
  buf[nl] = '\n';
  memcpy(buf + nl + 1, host_feat, fl);
  buf[nl + 1 + fl] = '\n';
  size_t len = nl + fl + 2;
  xpj_l2_fsize_block(); /* past ulimit -f: a failed write, not SIGXFSZ */
  bool ok = write(fd, buf, len) == (ssize_t)len && fchmod(fd, 0600) == 0;
  xpj_l2_fsize_restore();
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0)
    unlink(tmp);
}
#endif

#if defined(__x86_64__)
/* Without LLVM: the x86-64 psABI level this CPU and its OS support
 * (x86-64-v2, -v3, -v4 or the baseline), with no feature list: a subset of
 * what LLVM would name, so code compiled for it runs here, if slower. */
static void psabi_level(char *name, size_t size, char *feat) {
  unsigned a, b, c, c1 = 0, d, b7 = 0, cx = 0;
  unsigned max = __get_cpuid_max(0, NULL);
  if (max >= 1)
    __cpuid(1, a, b, c1, d);
  if (max >= 7)
    __cpuid_count(7, 0, a, b7, c, d);
  if ((unsigned)__get_cpuid_max(0x80000000, NULL) >= 0x80000001u)
    __cpuid(0x80000001, a, b, cx, d);
  uint64_t xcr0 = os_xsave_features(c1);
#define ALL(x, m) (((x) & (m)) == (m))
  bool v2 = ALL(c1, (1u << 0) | (1u << 9) | (1u << 13) | (1u << 19) |
                        (1u << 20) | (1u << 23)) &&
            (cx & 1u);
  bool v3 = v2 && ALL(c1, (1u << 12) | (1u << 22) | (1u << 27) | (1u << 28) |
                              (1u << 29)) &&
            ALL(b7, (1u << 3) | (1u << 5) | (1u << 8)) && (cx & (1u << 5)) &&
            ALL(xcr0, 0x6);
  bool v4 = v3 && ALL(b7, (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) |
                              (1u << 31)) &&
            ALL(xcr0, 0xe6);
#undef ALL
  snprintf(name, size, "%s", v4 ? "x86-64-v4" : v3 ? "x86-64-v3"
                             : v2 ? "x86-64-v2" : "x86-64");
  feat[0] = 0;
}
#endif

static int ask_llvm(char *why, size_t whysize) {
  const xpj_llvm_api *api = xpj_llvm(why, whysize);
  if (!api)
    return -1;
  api->init();
  if (api->host_cpu(host_name, sizeof host_name, host_feat,
                    sizeof host_feat) != 0 ||
      !plain(host_name, NULL) || !plain(host_feat, "+,")) {
    snprintf(why, whysize, "LLVM's name or feature list of the host CPU is "
             "too long or malformed");
    return -1;
  }
  return 0;
}

void xpj_host_cpu_atfork(int phase) {
  if (phase == 0)
    pthread_mutex_lock(&mu);
  else
    pthread_mutex_unlock(&mu);
}

int xpj_host_cpu(const xpj_cache_config *cache, char *name,
                 size_t namesize, char *features, size_t featsize, char *why,
                 size_t whysize) {
  pthread_mutex_lock(&mu);
  int rc = 0;
  if (!known) {
#if defined(__x86_64__)
    char path[PATH_MAX], dir[PATH_MAX];
    char name2[NAME_MAX_LEN], feat2[FEAT_MAX_LEN];
    bool have = memo_path(cache, path, sizeof path, dir, sizeof dir);
    /* a cache read-only or off (however it was asked for: the context's
     * descriptor, XPJIT_CACHE, a bundle) has nothing written beside it,
     * this file included, nor its directory made; a file there is read */
    bool writable = xpj_cache_config_mode(cache) == XPJ_CACHE_MODE_RW;
    /* with LLVM here already, its answer costs nothing: the file is only
     * checked (and written when it is missing or says otherwise) */
    if (have && !xpj_llvm_present() &&
        memo_read(path, dir, host_name, host_feat))
      known = true;
    else if ((rc = ask_llvm(why, whysize)) == 0) {
      known = true;
      if (have && writable &&
          !(memo_read(path, dir, name2, feat2) && !strcmp(name2, host_name) &&
            !strcmp(feat2, host_feat)))
        memo_write(path, dir);
    } else {
      /* no LLVM here (its plugin missing): the psABI level, not kept in
       * the file, so that a process with LLVM writes LLVM's answer */
      psabi_level(host_name, sizeof host_name, host_feat);
      known = true;
      rc = 0;
    }
#else
    if ((rc = ask_llvm(why, whysize)) == 0)
      known = true;
#endif
  }
  if (rc == 0 && (strlen(host_name) >= namesize ||
                  strlen(host_feat) >= featsize)) {
    snprintf(why, whysize, "the host CPU's name or feature list is too long");
    rc = -1;
  }
  if (rc == 0) {
    memcpy(name, host_name, strlen(host_name) + 1);
    memcpy(features, host_feat, strlen(host_feat) + 1);
  }
  pthread_mutex_unlock(&mu);
  return rc;
}
