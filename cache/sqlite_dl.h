/*
 * sqlite_dl.h - SQLite, loaded when the cache first opens a database.
 *
 * libxpjit does not link libsqlite3: mapping it and binding its symbols
 * (Debian builds it with BIND_NOW: some 1,600 lookups) cost every process
 * that links libxpjit a few hundred microseconds of its start, and a
 * process whose kernels come from hit files, a daemon or Redis never
 * opens a database (docs/api.md, "What a process loads"). cache.c
 * includes this header instead of <sqlite3.h>: each sqlite3_* function
 * it calls becomes a call through xpj_sqlite, filled by xpj_sqlite_load
 * (dlopen of libsqlite3.so.0) before the first sqlite3_open*; until
 * then finalize, close, close_v2 and free take NULL and do nothing, as
 * SQLite's do. Nothing else in libxpjit calls SQLite.
 */
#ifndef XPJIT_SQLITE_DL_H
#define XPJIT_SQLITE_DL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>

#define XPJ_SQLITE_FUNCS(X)                                                    \
  X(bind_blob64) X(bind_double) X(bind_int) X(bind_int64) X(bind_text)         \
  X(busy_timeout) X(changes) X(clear_bindings) X(close) X(close_v2)            \
  X(column_blob) X(column_bytes) X(column_double) X(column_int)                \
  X(column_int64) X(column_text) X(create_function) X(db_config)               \
  X(db_readonly) X(errstr) X(exec) X(extended_result_codes) X(finalize)        \
  X(free) X(get_autocommit) X(mprintf) X(open) X(open_v2) X(prepare_v2)        \
  X(prepare_v3) X(reset) X(step) X(str_appendall) X(str_appendchar)            \
  X(str_appendf) X(str_finish) X(str_new) X(user_data) X(value_text)           \
  X(value_type)

typedef struct xpj_sqlite_api {
#define XPJ_SQLITE_FIELD(n) __typeof__(sqlite3_##n) *n;
  XPJ_SQLITE_FUNCS(XPJ_SQLITE_FIELD)
#undef XPJ_SQLITE_FIELD
} xpj_sqlite_api;

extern xpj_sqlite_api xpj_sqlite;

/* Loads SQLite once (thread-safe); true when every function is there.
 * Otherwise false, and why (dlerror's text) stays in xpj_sqlite_why. */
bool xpj_sqlite_load(void);
const char *xpj_sqlite_why(void);

#ifndef XPJ_SQLITE_DL_IMPL
#define sqlite3_bind_blob64 (*xpj_sqlite.bind_blob64)
#define sqlite3_bind_double (*xpj_sqlite.bind_double)
#define sqlite3_bind_int (*xpj_sqlite.bind_int)
#define sqlite3_bind_int64 (*xpj_sqlite.bind_int64)
#define sqlite3_bind_text (*xpj_sqlite.bind_text)
#define sqlite3_busy_timeout (*xpj_sqlite.busy_timeout)
#define sqlite3_changes (*xpj_sqlite.changes)
#define sqlite3_clear_bindings (*xpj_sqlite.clear_bindings)
#define sqlite3_close (*xpj_sqlite.close)
#define sqlite3_close_v2 (*xpj_sqlite.close_v2)
#define sqlite3_column_blob (*xpj_sqlite.column_blob)
#define sqlite3_column_bytes (*xpj_sqlite.column_bytes)
#define sqlite3_column_double (*xpj_sqlite.column_double)
#define sqlite3_column_int (*xpj_sqlite.column_int)
#define sqlite3_column_int64 (*xpj_sqlite.column_int64)
#define sqlite3_column_text (*xpj_sqlite.column_text)
#define sqlite3_create_function (*xpj_sqlite.create_function)
#define sqlite3_db_config (*xpj_sqlite.db_config)
#define sqlite3_db_readonly (*xpj_sqlite.db_readonly)
#define sqlite3_errstr (*xpj_sqlite.errstr)
#define sqlite3_exec (*xpj_sqlite.exec)
#define sqlite3_extended_result_codes (*xpj_sqlite.extended_result_codes)
#define sqlite3_finalize (*xpj_sqlite.finalize)
#define sqlite3_free (*xpj_sqlite.free)
#define sqlite3_get_autocommit (*xpj_sqlite.get_autocommit)
#define sqlite3_mprintf (*xpj_sqlite.mprintf)
#define sqlite3_open (*xpj_sqlite.open)
#define sqlite3_open_v2 (*xpj_sqlite.open_v2)
#define sqlite3_prepare_v2 (*xpj_sqlite.prepare_v2)
#define sqlite3_prepare_v3 (*xpj_sqlite.prepare_v3)
#define sqlite3_reset (*xpj_sqlite.reset)
#define sqlite3_step (*xpj_sqlite.step)
#define sqlite3_str_appendall (*xpj_sqlite.str_appendall)
#define sqlite3_str_appendchar (*xpj_sqlite.str_appendchar)
#define sqlite3_str_appendf (*xpj_sqlite.str_appendf)
#define sqlite3_str_finish (*xpj_sqlite.str_finish)
#define sqlite3_str_new (*xpj_sqlite.str_new)
#define sqlite3_user_data (*xpj_sqlite.user_data)
#define sqlite3_value_text (*xpj_sqlite.value_text)
#define sqlite3_value_type (*xpj_sqlite.value_type)
#endif

#endif
