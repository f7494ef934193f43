/* hitfile.h - hit files: a copy of each successful row of the user cache
 * in a file of its own, PATH.hits/DIGEST, which a process reads without
 * opening the database (docs/cache.md, "Hit files"). Internal to
 * libxpjit: cache.c writes, reads and removes them; kcache.c opens its
 * cache with xpj_l2_open, whose database is opened at its first need. */
#ifndef XPJ_HITFILE_H
#define XPJ_HITFILE_H

#include "xpjit_cache.h"

#include <dirent.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <stddef.h>
#include <stdint.h>

/* Which database file a hit file copies a row of: device, inode, birth
 * time in ns (0 where the file system keeps none). */
typedef struct xpj_hit_db {
  uint64_t dev, ino, born;
} xpj_hit_db;

/* A hit file's fields; the strings and data point into the file's bytes
 * (not NUL-terminated). */
typedef struct xpj_hit {
  int64_t created_ms;
  uint64_t local_bytes, scratch_bytes;
  double compile_ms;
  xpj_hit_db db; /* the database file it copies a row of */
  char checksum[65]; /* the cache's HMAC of it (cache.c, hit_sum), hex */
  const char *key, *entry, *log;
  size_t key_len, entry_len, log_len;
  const uint8_t *data;
  uint64_t size;
} xpj_hit;

/* The largest hit file (a kernel binary and its strings). */
#define XPJ_HIT_MAX ((uint64_t)64 << 20)

/* Decodes n bytes; 0, or -1 when they are not exactly one hit file of
 * this version (every length checked; nothing is read past n). */
int xpj_hitfile_parse(const uint8_t *buf, size_t n, xpj_hit *h);
/* Encodes h (malloc'd, *n bytes); NULL when out of memory, too big, or a
 * field the decoder would refuse (compile_ms outside [0, 1e12)). */
uint8_t *xpj_hitfile_encode(const xpj_hit *h, size_t *n);

/* PATH.hits, the directory of the cache file path: its descriptor when it
 * is a directory of this user that nobody else may write (made, 0700,
 * when create), else -1. */
int xpj_hitdir_open(const char *db_path, bool create);
/* The same for DB_PATH + suffix (".flight": single flight's lock files). */
int xpj_l2_subdir_open(const char *db_path, const char *suffix,
                       bool create);
/* The file DIGEST in dfd, when it is a regular file of this user that
 * nobody else may read or write, of HEAD (148) to XPJ_HIT_MAX bytes: its
 * bytes (malloc'd, *n) and when it was last written or touched; else
 * NULL. */
uint8_t *xpj_hitfile_read(int dfd, const char *digest, size_t *n,
                          int64_t *mtime_ms);
/* xpj_hitfile_read, saying why not into why (size bytes; may be NULL;
 * untouched when the file is read): gone, a link, not a regular file,
 * another's, open to others, empty, cut short, too big, unreadable. */
uint8_t *xpj_hitfile_read_why(int dfd, const char *digest, size_t *n,
                              int64_t *mtime_ms, char *why, size_t size);
/* What is at DIGEST in dfd, by lstat alone (its bytes not read): 0
 * nothing; 1 a file xpj_hitfile_read would read (*sb its lstat); -1
 * something it refuses (empty, cut short, too big, a FIFO, a link, a
 * directory, another's, open to others), which a writer replaces with a
 * new file renamed over it (all but a directory). */
int xpj_hitfile_state(int dfd, const char *digest, struct stat *sb);
/* Writes DIGEST in dfd as a new file, mode 0600, renamed into place. */
bool xpj_hitfile_write(int dfd, const char *digest, const uint8_t *buf,
                       size_t n);
/* Its time set to ms since the epoch (the row's last recorded use). */
void xpj_hitfile_set_time(int dfd, const char *digest, int64_t ms);
/* The identity of the database file now there; false when there is none. */
bool xpj_hitfile_db_id(const char *db_path, xpj_hit_db *id);
/* An alias ("a" and 64 hex digits) in dfd: a symbolic link whose text,
 * "DIGEST:TAG", says which hit file a request named by what the caller
 * gave led to (xpj_l2_alias_digest) and the cache's HMAC of that (TAG); it is
 * never followed. False when there is none of that form. */
bool xpj_hitfile_alias(int dfd, const char *alias, char digest[65],
                       char tag[65]);
/* The text of an alias's link (n bytes, not NUL-terminated): exactly
 * "DIGEST:TAG", each 64 lowercase hex digits. */
bool xpj_hitfile_alias_parse(const char *t, size_t n, char digest[65],
                             char tag[65]);
/* The code of a cache key's text (len bytes, not NUL-terminated): the
 * 64 lowercase hex digits of its first line "code ..." after another
 * line; false when there is none of that form. */
bool xpj_hitfile_key_code(const char *key, size_t len, char code[65]);
/* Makes alias a symbolic link with the text "DIGEST:TAG": made in place
 * where there is none, else (another text there) renamed into place over
 * it. True when this call made it; false when it failed or another
 * process had made the same link. */
bool xpj_hitfile_set_alias(int dfd, const char *alias, const char *digest,
                           const char *tag);
/* Removes DIGEST (64 lowercase hex digits) or an alias ("a" and 64; any
 * other name is ignored). */
void xpj_hitfile_unlink(int dfd, const char *digest);
/* dfd's entries, read through a descriptor of its own; closedir it. */
DIR *xpj_hitdir_list(int dfd);
/* Removes every hit file, alias and left-over temporary file in dfd. */
void xpj_hitdir_wipe(int dfd);

/* xpj_cache_open for libxpjit's contexts: the database is opened at the
 * first call that needs it; until then xpj_cache_get answers from hit
 * files (a fresh process's hits cost no SQLite), and the uses and
 * counters of those hits go to the side file at close. */
xpj_status xpj_l2_open(const xpj_cache_config *cfg, xpj_cache **out);
/* xpj_cache_get answered from the hit file alone: XPJ_ERR_NOT_FOUND when
 * there is none, or the handle opened its database (then ask
 * xpj_cache_get), never opening it. */
xpj_status xpj_l2_get_file(xpj_cache *c, const xpj_cache_key *k,
                           xpj_cache_entry *out);
/* Whether the handle is off (NULL too): it answers nothing, ever. */
bool xpj_l2_off(xpj_cache *c);
/* Whether the handle is one of xpj_l2_open that has not opened its
 * database yet. */
bool xpj_l2_unopened(xpj_cache *c);
/* A hit through an alias: a name the caller makes from what it was given
 * (its source, kernel, dtypes, target, ...: anything that decides the key's
 * code), kept as a symbolic link (PATH.hits/a<SHA-256 of alias>) whose
 * text names the hit file of the key it led to, with the cache's HMAC of
 * both names. In two steps, so that a caller can look in its own memory
 * between them: xpj_l2_alias_digest gives the digest the alias names
 * (false when there is none, or it is not the cache's: removed);
 * xpj_l2_get_aliased reads that hit file as the request k without its
 * code (k->code is ignored): it must be intact, within its hour, and of
 * exactly k with the code it names, which out->code then holds (counted
 * as an L2 hit); XPJ_ERR_NOT_FOUND otherwise (the alias removed). Both
 * answer only while the database is not opened (a process that opened it
 * answers from it). */
bool xpj_l2_alias_digest(xpj_cache *c, const char *alias, char digest[65]);
xpj_status xpj_l2_get_aliased(xpj_cache *c, const char *alias,
                              const char *digest, const xpj_cache_key *k,
                              xpj_cache_entry *out);
/* Makes alias lead to k's row, when its hit file is there; or to the row
 * of the key whose digest is given. */
void xpj_l2_set_alias(xpj_cache *c, const char *alias, const xpj_cache_key *k);
void xpj_l2_set_alias_digest(xpj_cache *c, const char *alias,
                             const char *digest);
/* A handle of xpj_l2_open with its database opened now (what the handle
 * of xpj_context_cache, given to callers, is: every call of theirs may
 * need the database, and xpj_cache_mode_of should say what it found). */
void xpj_l2_ready(xpj_cache *c);
/* SQLite's data_version of c's connection: it changes when another
 * connection (another process) commits to the file; -1 when unknown (no
 * database opened, busy, an error; values of a reopened connection differ
 * from the earlier ones). xpjitd's first looks. Without wait, a handle in
 * use by another thread is unknown too: never a wait (the event loop). */
int64_t xpj_l2_data_version(xpj_cache *c, bool wait);
/* The device and inode of the database file c's writer connection has
 * open (taken when it opened it: after the handle replaced a damaged
 * file, the new one; a file someone else put at the path since is not
 * it). False when c has no writer connection, or, without wait, when
 * another thread holds the handle (never a wait: xpjitd's event loop). */
bool xpj_l2_db_identity(xpj_cache *c, bool wait, uint64_t *dev,
                        uint64_t *ino);
/* Single flight among the processes of one cache file: before compiling
 * the key of digest, takes its turn (an flock on PATH.flight/DIGEST, a
 * directory and file of this user only), waiting while another process
 * holds it, at most wait_ms (how long it waited into *waited_ms). The
 * locked descriptor; the caller then looks in the file again (the one
 * who held it has written its row) before it compiles, and gives it back
 * with xpj_l2_flight_end once the row is written. *after_one: another
 * process had this turn and ended it (marked the file): when the row is
 * not there all the same, the caller gives the turn up at once
 * (xpj_l2_flight_yield) and compiles alongside the others. -1 when
 * there is nothing to take (a bundle, read-only, a network file system,
 * XPJIT_CACHE_SINGLE_FLIGHT=0, a directory not this user's alone) or it
 * was not had in time: compile anyway. A child forked while the turn is
 * held does not keep it. */
int xpj_l2_flight_begin(xpj_cache *c, const char *digest, int64_t wait_ms,
                        int64_t *waited_ms, bool *after_one);
/* Lets the others waiting on fd go (fd is still to be ended). */
void xpj_l2_flight_yield(int fd);
/* Ends the turn of fd: marks its file (for those still waiting on it)
 * and, settled (the key's row is in the file now), removes its name. */
void xpj_l2_flight_end(xpj_cache *c, const char *digest, int fd,
                       bool settled);

/* Around writes of the cache's files: with a file size limit set
 * (RLIMIT_FSIZE), SIGXFSZ blocked in this thread, so that a write past
 * it fails (EFBIG) instead of ending the process, and one it raised
 * taken back at the restore, which puts the thread's mask back. Nested
 * pairs: the outermost acts. Every call of xpj_cache_* does this. */
void xpj_l2_fsize_block(void);
void xpj_l2_fsize_restore(void);

#endif
