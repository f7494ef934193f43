/*
 * hitfile.c - the hit files of the user cache (hitfile.h): their format,
 * and the files themselves.
 *
 * A hit file, little-endian, exactly:
 *
 *   0    8  "XPJHIT\x01\n"
 *   8    8  created (ms since the epoch): names the row, as the side file
 *           does (cache.c)
 *   16   8  local bytes        24   8  scratch bytes
 *   32   8  compile ms (an IEEE double)
 *   40  24  the database file's device, inode and birth time (ns; 0
 *           where the file system keeps none): a file of another
 *           database (deleted, moved aside, replaced, even under the same
 *           inode) is not a hit
 *   64  64  its checksum: HMAC-SHA-256 with the cache's key of the
 *           row's fields and these (cache.c, hit_sum), hex
 *   128  4  key text length K (<= 64 KiB)
 *   132  4  entry name length E (<= 1 KiB)
 *   136  4  log length L (<= 1 MiB)
 *   140  8  data size D
 *   148     K + E + L + D bytes: key text, entry, log, data
 *
 * and nothing after. Strings hold no NUL. The reader (cache.c) believes a
 * file only when its key text is the one asked for and its checksum is
 * right under the cache's key: a file damaged, truncated, copied from
 * another key or from another user's cache is not a hit.
 */
#define _GNU_SOURCE
#include "hitfile.h"
#include "trust.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

static const char MAGIC[8] = {'X', 'P', 'J', 'H', 'I', 'T', 1, '\n'};
enum { HEAD = 148, KEY_MAX = 64 << 10, ENTRY_MAX = 1 << 10, LOG_MAX = 1 << 20 };

static uint64_t rd(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static void wr(uint8_t *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++, v >>= 8)
    p[i] = (uint8_t)v;
}

static bool no_nul(const uint8_t *p, size_t n) { return !memchr(p, 0, n); }

int xpj_hitfile_parse(const uint8_t *buf, size_t n, xpj_hit *h) {
  memset(h, 0, sizeof *h);
  if (!buf || n < HEAD || n > XPJ_HIT_MAX || memcmp(buf, MAGIC, 8))
    return -1;
  uint64_t created = rd(buf + 8, 8), cms = rd(buf + 32, 8);
  uint64_t k = rd(buf + 128, 4), e = rd(buf + 132, 4), l = rd(buf + 136, 4),
           d = rd(buf + 140, 8);
  if (created > INT64_MAX || k == 0 || k > KEY_MAX || e > ENTRY_MAX ||
      l > LOG_MAX || d > XPJ_HIT_MAX || HEAD + k + e + l + d != n)
    return -1;
  for (int i = 0; i < 64; i++) {
    char ch = (char)buf[64 + i];
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
      return -1;
    h->checksum[i] = ch;
  }
  h->checksum[64] = 0;
  const uint8_t *at = buf + HEAD;
  if (!no_nul(at, k + e + l))
    return -1;
  double ms;
  memcpy(&ms, &cms, sizeof ms);
  if (!(ms >= 0 && ms < 1e12)) /* also NaN */
    return -1;
  h->created_ms = (int64_t)created;
  h->local_bytes = rd(buf + 16, 8);
  h->scratch_bytes = rd(buf + 24, 8);
  h->compile_ms = ms;
  h->db.dev = rd(buf + 40, 8);
  h->db.ino = rd(buf + 48, 8);
  h->db.born = rd(buf + 56, 8);
  h->key = (const char *)at;
  h->key_len = k;
  h->entry = (const char *)at + k;
  h->entry_len = e;
  h->log = (const char *)at + k + e;
  h->log_len = l;
  h->data = at + k + e + l;
  h->size = d;
  return 0;
}

uint8_t *xpj_hitfile_encode(const xpj_hit *h, size_t *n) {
  if (!(h->compile_ms >= 0 && h->compile_ms < 1e12) || h->key_len == 0 ||
      h->key_len > KEY_MAX || h->entry_len > ENTRY_MAX ||
      h->log_len > LOG_MAX ||
      h->size > XPJ_HIT_MAX - HEAD - h->key_len - h->entry_len - h->log_len ||
      h->created_ms < 0 || strlen(h->checksum) != 64)
    return NULL;
  size_t total = HEAD + h->key_len + h->entry_len + h->log_len + h->size;
  uint8_t *b = malloc(total);
  if (!b)
    return NULL;
  memcpy(b, MAGIC, 8);
  uint64_t cms;
  memcpy(&cms, &h->compile_ms, sizeof cms);
  wr(b + 8, (uint64_t)h->created_ms, 8);
  wr(b + 16, h->local_bytes, 8);
  wr(b + 24, h->scratch_bytes, 8);
  wr(b + 32, cms, 8);
  wr(b + 40, h->db.dev, 8);
  wr(b + 48, h->db.ino, 8);
  wr(b + 56, h->db.born, 8);
  memcpy(b + 64, h->checksum, 64);
  wr(b + 128, h->key_len, 4);
  wr(b + 132, h->entry_len, 4);
  wr(b + 136, h->log_len, 4);
  wr(b + 140, h->size, 8);
  uint8_t *at = b + HEAD;
  memcpy(at, h->key, h->key_len);
  at += h->key_len;
  if (h->entry_len)
    memcpy(at, h->entry, h->entry_len);
  at += h->entry_len;
  if (h->log_len)
    memcpy(at, h->log, h->log_len);
  at += h->log_len;
  if (h->size)
    memcpy(at, h->data, h->size);
  *n = total;
  return b;
}

int xpj_hitdir_open(const char *db_path, bool create) {
  return xpj_l2_subdir_open(db_path, ".hits", create);
}

int xpj_l2_subdir_open(const char *db_path, const char *suffix,
                       bool create) {
  char p[4200];
  int k = snprintf(p, sizeof p, "%s%s", db_path, suffix);
  if (k <= 0 || (size_t)k >= sizeof p)
    return -1;
  if (create && mkdir(p, 0700) != 0 && errno != EEXIST)
    return -1;
  int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat sb;
  if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISDIR(sb.st_mode) ||
                  sb.st_uid != geteuid() || (sb.st_mode & 022))) {
    close(fd);
    fd = -1;
  }
  return fd;
}

static bool digest_name(const char *d) {
  return d && strlen(d) == 64 && strspn(d, "0123456789abcdef") == 64;
}

/* an alias: "a" and 64 lowercase hex digits */
static bool alias_name(const char *d) {
  return d && d[0] == 'a' && digest_name(d + 1);
}

/* Whether sb is what a hit file must be (a regular file of this user
 * that nobody else may read or write, of HEAD to XPJ_HIT_MAX bytes); why
 * not into why when given. */
static bool hit_stat_ok(const struct stat *sb, char *why, size_t size) {
  const char *kind =
      S_ISLNK(sb->st_mode)    ? "a symbolic link (never followed)"
      : S_ISDIR(sb->st_mode)  ? "a directory"
      : S_ISFIFO(sb->st_mode) ? "a FIFO"
      : !S_ISREG(sb->st_mode) ? "not a regular file"
                              : NULL;
  if (kind) {
    if (why)
      snprintf(why, size, "%s", kind);
  } else if (sb->st_uid != geteuid()) {
    if (why)
      snprintf(why, size, "owned by uid %u, not by this user",
               (unsigned)sb->st_uid);
  } else if (sb->st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)) {
    if (why)
      snprintf(why, size, "readable or writable by others (mode %04o)",
               (unsigned)(sb->st_mode & 07777));
  } else if (sb->st_size < HEAD) {
    if (why)
      snprintf(why, size, sb->st_size ? "cut short (%lld bytes)"
                                      : "empty (%lld bytes)",
               (long long)sb->st_size);
  } else if ((uint64_t)sb->st_size > XPJ_HIT_MAX) {
    if (why)
      snprintf(why, size, "too big (%lld bytes; a hit file has at most "
               "%llu)", (long long)sb->st_size,
               (unsigned long long)XPJ_HIT_MAX);
  } else {
    return true;
  }
  return false;
}

int xpj_hitfile_state(int dfd, const char *digest, struct stat *sb) {
  if (dfd < 0 || !digest_name(digest) ||
      fstatat(dfd, digest, sb, AT_SYMLINK_NOFOLLOW) != 0)
    return 0;
  return hit_stat_ok(sb, NULL, 0) ? 1 : -1;
}

uint8_t *xpj_hitfile_read(int dfd, const char *digest, size_t *n,
                          int64_t *mtime_ms) {
  return xpj_hitfile_read_why(dfd, digest, n, mtime_ms, NULL, 0);
}

uint8_t *xpj_hitfile_read_why(int dfd, const char *digest, size_t *n,
                              int64_t *mtime_ms, char *why, size_t size) {
  char whybuf[512]; /* (said only when it is not read) */
  if (!why) {
    why = whybuf;
    size = sizeof whybuf;
  }
  if (dfd < 0 || !digest_name(digest)) {
    snprintf(why, size, "not a hit file's name");
    return NULL;
  }
  /* non-blocking: a FIFO planted there must not hang the open */
  int fd = openat(dfd, digest, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    snprintf(why, size, "%s",
             errno == ELOOP ? "a symbolic link (never followed)"
                            : strerror(errno));
    return NULL;
  }
  trust t;
  trust_for_cache(&t);
  struct stat sb;
  uint8_t *b = NULL;
  if (fstat(fd, &sb) != 0)
    snprintf(why, size, "%s", strerror(errno));
  else if (hit_stat_ok(&sb, why, size) &&
           trust_stat(&t, &sb, digest, true, why, size) == TRUST_OK &&
           !(b = malloc((size_t)sb.st_size)))
    snprintf(why, size, "out of memory");
  if (b) {
    size_t got = 0;
    while (got < (size_t)sb.st_size) {
      ssize_t r = read(fd, b + got, (size_t)sb.st_size - got);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break;
      got += (size_t)r;
    }
    if (got != (size_t)sb.st_size) {
      snprintf(why, size, "could not be read whole (%zu of %lld bytes)", got,
               (long long)sb.st_size);
      free(b);
      b = NULL;
    } else {
      *n = got;
      *mtime_ms = (int64_t)sb.st_mtim.tv_sec * 1000 +
                  sb.st_mtim.tv_nsec / 1000000;
    }
  }
  close(fd);
  return b;
}

bool xpj_hitfile_write(int dfd, const char *digest, const uint8_t *buf,
                       size_t n) {
  if (dfd < 0 || !digest_name(digest))
    return false;
  char tmp[128];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(tmp, sizeof tmp, ".tmp.%.16s.%ld.%ld", digest, (long)getpid(),
           (long)ts.tv_nsec);
  int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                                O_CLOEXEC, 0600);
  if (fd < 0)
    return false;
  size_t put = 0;
  while (put < n) {
    ssize_t w = write(fd, buf + put, n - put);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      break;
    put += (size_t)w;
  }
  bool ok = put == n && fchmod(fd, 0600) == 0;
  ok = close(fd) == 0 && ok;
  if (!ok || renameat(dfd, tmp, dfd, digest) != 0) {
    unlinkat(dfd, tmp, 0);
    return false;
  }
  return true;
}

void xpj_hitfile_set_time(int dfd, const char *digest, int64_t ms) {
  if (dfd < 0 || !digest_name(digest) || ms < 0)
    return;
  struct timespec t[2] = {{ms / 1000, (long)(ms % 1000) * 1000000L},
                          {ms / 1000, (long)(ms % 1000) * 1000000L}};
  utimensat(dfd, digest, t, AT_SYMLINK_NOFOLLOW);
}

bool xpj_hitfile_db_id(const char *db_path, xpj_hit_db *id) {
  struct statx sx;
  memset(id, 0, sizeof *id);
  if (statx(AT_FDCWD, db_path, 0, STATX_INO | STATX_BTIME, &sx) != 0 ||
      !sx.stx_ino)
    return false;
  id->dev = (uint64_t)makedev(sx.stx_dev_major, sx.stx_dev_minor);
  id->ino = sx.stx_ino;
  if (sx.stx_mask & STATX_BTIME)
    id->born = (uint64_t)sx.stx_btime.tv_sec * 1000000000u +
               sx.stx_btime.tv_nsec;
  return true;
}

void xpj_hitfile_unlink(int dfd, const char *digest) {
  if (dfd >= 0 && (digest_name(digest) || alias_name(digest)))
    unlinkat(dfd, digest, 0);
}

bool xpj_hitfile_alias_parse(const char *t, size_t n, char digest[65],
                             char tag[65]) {
  if (n != 129 || t[64] != ':')
    return false;
  memcpy(digest, t, 64);
  memcpy(tag, t + 65, 64);
  digest[64] = tag[64] = 0;
  return digest_name(digest) && digest_name(tag);
}

bool xpj_hitfile_alias(int dfd, const char *alias, char digest[65],
                       char tag[65]) {
  char t[130];
  ssize_t n = dfd >= 0 && alias_name(alias)
                  ? readlinkat(dfd, alias, t, sizeof t)
                  : -1;
  return n > 0 && xpj_hitfile_alias_parse(t, (size_t)n, digest, tag);
}

bool xpj_hitfile_key_code(const char *key, size_t len, char code[65]) {
  static const char tag[] = "\ncode ";
  const size_t tl = sizeof tag - 1;
  for (size_t at = 0; len >= tl + 65 && at <= len - tl - 65; at++)
    if (!memcmp(key + at, tag, tl)) {
      const char *p = key + at + tl;
      if (p[64] != '\n')
        return false;
      for (int i = 0; i < 64; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
          return false;
      memcpy(code, p, 64);
      code[64] = 0;
      return true;
    }
  return false;
}

bool xpj_hitfile_set_alias(int dfd, const char *alias, const char *digest,
                           const char *tag) {
  if (dfd < 0 || !alias_name(alias) || !digest_name(digest) ||
      !digest_name(tag))
    return false;
  char to[130];
  int tn = snprintf(to, sizeof to, "%s:%s", digest, tag);
  /* Made in place where there is none: a link is whole when its name
   * appears. In a start-up storm every process that got the kernel at
   * the same moment makes it; all but one find it made (EEXIST, no inode
   * allocated nor freed), which a temporary link renamed into place
   * cost each of them (two directory writes and an inode). */
  if (symlinkat(to, dfd, alias) == 0)
    return true;
  if (errno != EEXIST)
    return false;
  char was[131];
  ssize_t wn = readlinkat(dfd, alias, was, sizeof was);
  if (wn == tn && !memcmp(was, to, (size_t)tn))
    return false; /* another process made this very one */
  /* another link (stale, or another's): replaced whole */
  char tmp[128];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(tmp, sizeof tmp, ".tmp.%.16s.%ld.%ld", alias, (long)getpid(),
           (long)ts.tv_nsec);
  if (symlinkat(to, dfd, tmp) != 0)
    return false;
  if (renameat(dfd, tmp, dfd, alias) != 0) {
    unlinkat(dfd, tmp, 0);
    return false;
  }
  return true;
}

DIR *xpj_hitdir_list(int dfd) {
  /* its own descriptor: a dup would share the offset of earlier reads */
  int d2 =
      dfd >= 0 ? openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
  if (!d && d2 >= 0)
    close(d2);
  return d;
}

void xpj_hitdir_wipe(int dfd) {
  DIR *d = xpj_hitdir_list(dfd);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d)))
    if (digest_name(e->d_name) || alias_name(e->d_name) ||
        !strncmp(e->d_name, ".tmp.", 5))
      unlinkat(dfd, e->d_name, 0);
  closedir(d);
}
