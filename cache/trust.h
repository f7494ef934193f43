/*
 * trust.h - may the cache read this file? (cache/trust.c)
 *
 * Cache entries and bundles are code that runs as the user. A file that
 * another local user could have written, or could replace, is refused,
 * as ssh and gpg refuse their own files: see docs/cache.md, "Security
 * model". Paths given here are absolute with every symbolic link resolved
 * (realpath); the checks use lstat, so a link that appears after
 * resolving is refused, never followed.
 */
#ifndef XPJ_CACHE_TRUST_H
#define XPJ_CACHE_TRUST_H

#include <stdbool.h>
#include <sys/stat.h>
#include <stddef.h>
#include <sys/types.h>

#define TRUST_MAX_OWNERS 32

/* Who may own what. For the user cache: the user owns its directory and
 * files; the directories above may also belong to root. For bundles: the
 * file and every directory above it may belong to the user, root, or an
 * owner the user trusts. Nothing may be writable by group or others,
 * except directories above that are sticky (like /tmp). */
typedef struct trust {
  uid_t me;
  bool bundle;
  uid_t owners[TRUST_MAX_OWNERS]; /* trusted besides me and root */
  unsigned nowners;
} trust;

typedef enum trust_verdict {
  TRUST_OK,
  TRUST_ABSENT, /* trust_file: no such file (nothing to refuse) */
  TRUST_REFUSED /* why says what, whose, and the fix */
} trust_verdict;

/* The rules of the user cache. */
void trust_for_cache(trust *t);
/* The rules of bundles, with XPJIT_TRUSTED_OWNERS ("name,uid,...").
 * Returns false, with the entries that name no user in bad, when some
 * are ignored. */
bool trust_for_bundles(trust *t, char *bad, size_t size);

/* Every directory from "/" down to dir, dir included. For the cache, dir
 * is its own directory and must be the user's and not writable by others,
 * sticky or not; for bundles it is just the last directory above the
 * file. */
trust_verdict trust_dirs(const trust *t, const char *dir, char *why,
                         size_t size);
/* A file that may be absent: a regular file (not a link) of a permitted
 * owner, not writable by group or others. */
trust_verdict trust_file(const trust *t, const char *path, char *why,
                         size_t size);
/* The same check of a file already open (no race with its path). secret:
 * not readable by group or others either (a key). */
trust_verdict trust_fd(const trust *t, int fd, const char *path, bool secret,
                       char *why, size_t size);
/* The same check of what fstat (or lstat) said of a file. */
trust_verdict trust_stat(const trust *t, const struct stat *sb,
                         const char *path, bool secret, char *why,
                         size_t size);
/* trust_fd, with what fstat said in *sb. */
trust_verdict trust_fd_stat(const trust *t, int fd, const char *path,
                            bool secret, struct stat *sb, char *why,
                            size_t size);

#endif
