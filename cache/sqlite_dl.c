/* sqlite_dl.c - SQLite loaded on first use (sqlite_dl.h). */
#define _GNU_SOURCE
#define XPJ_SQLITE_DL_IMPL
#include "sqlite_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* Before the load, the functions SQLite allows a NULL argument, which
 * cache.c calls on handles that never opened a database (closing what is
 * not open): they do nothing, as SQLite's do for NULL. Every other call
 * needs a database, a statement or a string SQLite made, so comes after
 * the load. */
static int no_stmt(sqlite3_stmt *s) {
  (void)s;
  return SQLITE_OK;
}
static int no_db(sqlite3 *db) {
  (void)db;
  return SQLITE_OK;
}
static void no_mem(void *p) { (void)p; }

xpj_sqlite_api xpj_sqlite = {
    .finalize = no_stmt, .close = no_db, .close_v2 = no_db, .free = no_mem};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char why[256];

/* The soname the build linked against before (Debian's libsqlite3-0 and
 * every other distribution's): the same file the dynamic linker would
 * have mapped at the process's start, by the same search. A library
 * older than the functions we call (sqlite3_str_*: 3.24, 2018) is
 * refused whole. Never unloaded. */
static void load(void) {
  void *h = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why, sizeof why, "SQLite cannot be loaded: %s",
             e ? e : "libsqlite3.so.0 not found");
    return;
  }
  void *f;
#define XPJ_SQLITE_SYM(n)                                                      \
  if (!(f = dlsym(h, "sqlite3_" #n))) {                                        \
    snprintf(why, sizeof why,                                                  \
             "SQLite cannot be loaded: libsqlite3.so.0 has no sqlite3_%s "     \
             "(older than 3.24?)", #n);                                         \
    return;                                                                    \
  }                                                                            \
  *(void **)&xpj_sqlite.n = f;
  XPJ_SQLITE_FUNCS(XPJ_SQLITE_SYM)
#undef XPJ_SQLITE_SYM
  loaded = true;
}

bool xpj_sqlite_load(void) {
  pthread_once(&once, load);
  return loaded;
}

const char *xpj_sqlite_why(void) {
  return loaded ? "" : why[0] ? why : "SQLite was not loaded";
}
