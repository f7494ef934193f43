/*
 * trust.c - may the cache read this file?
 *
 * A cache entry or a bundle is a binary that will run as the user, so a
 * file that another local user could have written, or could swap for
 * another, must not be read. As ssh and gpg do for their files, every
 * directory from "/" down, and the file, must belong to the user or to
 * someone the user trusts, and none may be writable by group or others.
 * A sticky directory (/tmp) is fine above the cache or a bundle: others
 * may add names to it but not rename ours (its owner can, so the owner
 * must be trusted). The messages name the path, its owner and the fix.
 */
#define _GNU_SOURCE
#include "trust.h"

#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The user's name into buf ("" when the uid has none). */
static void user_name(uid_t uid, char *buf, size_t size) {
  struct passwd pw, *r = NULL;
  char tmp[2048];
  buf[0] = 0;
  if (getpwuid_r(uid, &pw, tmp, sizeof tmp, &r) == 0 && r)
    snprintf(buf, size, "%s", r->pw_name);
}

void trust_for_cache(trust *t) {
  memset(t, 0, sizeof *t);
  t->me = geteuid();
}

/* One XPJIT_TRUSTED_OWNERS entry: a user name or a uid. */
static bool parse_owner(const char *s, uid_t *uid) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  /* (uid_t)-1 is no one's: "4294967295" is a bad value like any other
   * (it was taken without the warning the others get) */
  if (*s >= '0' && *s <= '9' && !*end && !errno && v == (uid_t)v &&
      (uid_t)v != (uid_t)-1) {
    *uid = (uid_t)v;
    return true;
  }
  struct passwd pw, *r = NULL;
  char tmp[2048];
  if (getpwnam_r(s, &pw, tmp, sizeof tmp, &r) != 0 || !r)
    return false;
  *uid = r->pw_uid;
  return true;
}

bool trust_for_bundles(trust *t, char *bad, size_t size) {
  trust_for_cache(t);
  t->bundle = true;
  if (size)
    *bad = 0;
  const char *e = getenv("XPJIT_TRUSTED_OWNERS");
  char list[1024];
  snprintf(list, sizeof list, "%s", e ? e : "");
  bool ok = true;
  char *save = NULL;
  for (char *s = strtok_r(list, ", ", &save); s;
       s = strtok_r(NULL, ", ", &save)) {
    uid_t uid;
    if (parse_owner(s, &uid)) {
      if (t->nowners < TRUST_MAX_OWNERS)
        t->owners[t->nowners++] = uid;
    } else {
      size_t n = strlen(bad);
      if (n < size)
        snprintf(bad + n, size - n, "%s'%s'", ok ? "" : ", ", s);
      ok = false;
    }
  }
  return ok;
}

/* May uid own a directory above (ancestor) or the file / own directory? */
static bool may_own(const trust *t, uid_t uid, bool ancestor) {
  if (uid == t->me)
    return true;
  if (!t->bundle)
    return ancestor && uid == 0;
  if (uid == 0)
    return true;
  for (unsigned i = 0; i < t->nowners; i++)
    if (t->owners[i] == uid)
      return true;
  return false;
}

static trust_verdict refuse(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static trust_verdict refuse(char *why, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
  return TRUST_REFUSED;
}

/* own_dir: 1 the cache's directory, -1 a directory above, 0 a file */
static trust_verdict foreign(const trust *t, const char *path, uid_t owner,
                             mode_t mode, int own_dir, char *why,
                             size_t size) {
  char o[320], me[320], myname[256];
  char on[256], mn[256];
  user_name(owner, on, sizeof on);
  user_name(t->me, mn, sizeof mn);
  /* "alice (uid 1000)" / "uid 1234"; "you (bob, uid 1001)"; chown's name */
  if (*on)
    snprintf(o, sizeof o, "%s (uid %u)", on, (unsigned)owner);
  else
    snprintf(o, sizeof o, "uid %u", (unsigned)owner);
  if (*mn)
    snprintf(me, sizeof me, "you (%s, uid %u)", mn, (unsigned)t->me);
  else
    snprintf(me, sizeof me, "you (uid %u)", (unsigned)t->me);
  if (*mn)
    snprintf(myname, sizeof myname, "%s", mn);
  else
    snprintf(myname, sizeof myname, "%u", (unsigned)t->me);
  if (t->bundle)
    return refuse(why, size,
                  "%s belongs to %s, whom you do not trust: the bundle is "
                  "code that would run as %s. Add its owner to "
                  "XPJIT_TRUSTED_OWNERS if you trust them",
                  path, o, me);
  if (own_dir > 0 && (mode & (S_IWGRP | S_IWOTH))) /* chown would not do */
    return refuse(why, size,
                  "the cache directory %s belongs to %s, not to %s, and "
                  "others can write it (mode %04o): anyone could plant "
                  "entries that run as you. Set XPJIT_CACHE_DIR to a "
                  "directory of your own",
                  path, o, me, (unsigned)(mode & 07777));
  /* chown is root's: advised to root, or as root's to do when root owns
   * it; a user cannot take another user's directory (an outside probe:
   * alice was told to 'chown alice' mallory's) */
  char chown_[4400] = "";
  if (t->me == 0 || owner == 0)
    snprintf(chown_, sizeof chown_, ", or %s'chown %s %s'",
             t->me == 0 ? "" : "have root run ", myname, path);
  if (own_dir > 0)
    return refuse(why, size,
                  "the cache directory %s belongs to %s, not to %s: "
                  "its owner could plant entries that run as you. Set "
                  "XPJIT_CACHE_DIR to a directory of your own%s",
                  path, o, me, chown_);
  if (own_dir < 0) /* a directory above the cache */
    return refuse(why, size,
                  "%s belongs to %s, not to %s or root: its owner "
                  "could replace the cache below it with one that runs "
                  "code as you. Set XPJIT_CACHE_DIR to a directory of your "
                  "own",
                  path, o, me);
  return refuse(why, size,
                "%s belongs to %s, not to %s: it may hold what its "
                "owner wrote. Remove it%s%s",
                path, o, me, chown_, *chown_ ? " if you trust it" : "");
}

static trust_verdict writable(const trust *t, const char *path, mode_t mode,
                              const char *what, char *why, size_t size) {
  char fix[4400];
  if (t->bundle) /* a file, or a directory above that is not sticky */
    snprintf(fix, sizeof fix, "'chmod go-w %s'", path);
  else if (mode & S_ISVTX) /* shared on purpose, like /tmp */
    snprintf(fix, sizeof fix,
             "Set XPJIT_CACHE_DIR to a directory of your own");
  else
    snprintf(fix, sizeof fix, "'chmod go-w %s', or set XPJIT_CACHE_DIR to "
             "a directory of your own", path);
  return refuse(why, size,
                "%s%s is writable by other users (mode %04o%s): they could "
                "%s. %s",
                what, path, (unsigned)(mode & 07777),
                S_ISDIR(mode) && !(mode & S_ISVTX) ? ", not sticky" : "",
                t->bundle ? "replace the bundle with code that runs as you"
                          : "plant entries that run as you",
                fix);
}

/* One directory of the chain; own: the cache's own directory. */
static trust_verdict check_dir(const trust *t, const char *dir, bool own,
                               char *why, size_t size) {
  struct stat sb;
  if (lstat(dir, &sb) != 0)
    return refuse(why, size, "cannot examine %s: %s", dir, strerror(errno));
  if (S_ISLNK(sb.st_mode))
    return refuse(why, size, "%s became a symbolic link while it was being "
                  "checked", dir);
  if (!S_ISDIR(sb.st_mode))
    return refuse(why, size, "%s is not a directory", dir);
  if (!may_own(t, sb.st_uid, !own))
    return foreign(t, dir, sb.st_uid, sb.st_mode, own ? 1 : -1, why, size);
  bool open_to_others = (sb.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (open_to_others && (own || !(sb.st_mode & S_ISVTX)))
    return writable(t, dir, sb.st_mode, own ? "the cache directory " : "",
                    why, size);
  return TRUST_OK;
}

trust_verdict trust_dirs(const trust *t, const char *dir, char *why,
                         size_t size) {
  char p[4096];
  if (dir[0] != '/' || snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
    return refuse(why, size, "%s: not an absolute path of at most %zu "
                  "bytes", dir, sizeof p - 1);
  bool own = !t->bundle;
  bool root_only = strcmp(p, "/") == 0;
  trust_verdict v = check_dir(t, "/", own && root_only, why, size);
  for (char *s = p + 1; v == TRUST_OK && *s; s++)
    if (*s == '/') {
      *s = 0;
      v = check_dir(t, p, false, why, size);
      *s = '/';
    }
  if (v == TRUST_OK && !root_only)
    v = check_dir(t, p, own, why, size);
  return v;
}

static trust_verdict check_file(const trust *t, const struct stat *sb,
                                const char *path, bool secret, char *why,
                                size_t size) {
  if (S_ISLNK(sb->st_mode))
    return refuse(why, size, "%s is a symbolic link, which is not followed; "
                  "remove it", path);
  if (S_ISDIR(sb->st_mode))
    return refuse(why, size, "%s is a directory, not a file", path);
  if (!S_ISREG(sb->st_mode))
    return refuse(why, size, "%s is not a regular file", path);
  if (!may_own(t, sb->st_uid, false))
    return foreign(t, path, sb->st_uid, sb->st_mode, 0, why, size);
  if (sb->st_mode & (S_IWGRP | S_IWOTH))
    return writable(t, path, sb->st_mode, "", why, size);
  if (secret && (sb->st_mode & (S_IRGRP | S_IROTH)))
    return refuse(why, size, "%s is readable by other users (mode %04o) but "
                  "is a secret key: 'chmod 600 %s'", path,
                  (unsigned)(sb->st_mode & 07777), path);
  return TRUST_OK;
}

trust_verdict trust_stat(const trust *t, const struct stat *sb,
                         const char *path, bool secret, char *why,
                         size_t size) {
  return check_file(t, sb, path, secret, why, size);
}

trust_verdict trust_file(const trust *t, const char *path, char *why,
                         size_t size) {
  struct stat sb;
  if (lstat(path, &sb) != 0)
    return errno == ENOENT ? TRUST_ABSENT
                           : refuse(why, size, "cannot examine %s: %s", path,
                                    strerror(errno));
  return check_file(t, &sb, path, false, why, size);
}

trust_verdict trust_fd(const trust *t, int fd, const char *path, bool secret,
                       char *why, size_t size) {
  struct stat sb;
  return trust_fd_stat(t, fd, path, secret, &sb, why, size);
}

trust_verdict trust_fd_stat(const trust *t, int fd, const char *path,
                            bool secret, struct stat *sb, char *why,
                            size_t size) {
  if (fstat(fd, sb) != 0)
    return refuse(why, size, "cannot examine %s: %s", path, strerror(errno));
  return check_file(t, sb, path, secret, why, size);
}
