/* cli_daemon.c - xpjit-cli daemon status|stats|stop: talk to xpjitd over
 * its socket (docs/daemon.md). Exit status: 0 done (status: running), 1
 * no daemon or it failed, 2 usage. */
#include "cli.h"
#include "daemon.h"
#include "proto.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { OPT_SOCKET = CLI_LONG, OPT_JSON, OPT_TIMEOUT };

static void usage(FILE *out) {
  fprintf(out,
          "usage: %s daemon status|stats|stop [--socket PATH] [--json] "
          "[--timeout S]\n"
          "  status   is xpjitd running? its pid, versions, socket and cache\n"
          "  stats    its statistics (requests, hits, compiles, workers, ...)\n"
          "  stop     ask it to shut down and wait until it has (--timeout, "
          "default 30 s;\n"
          "           0: do not wait)\n"
          "\n"
          "  --socket PATH   the daemon's socket\n"
          "  --json          one JSON document on standard output\n"
          "  --timeout S     stop: how long to wait (0: not at all)\n"
          "  --color=WHEN    colour: auto (a terminal, without NO_COLOR), "
          "always, never\n"
          "\n"
          "The socket: --socket, else XPJIT_DAEMON when it names a path, "
          "else\n"
          "$XDG_RUNTIME_DIR/xpjit/xpjitd.sock (/tmp/xpjit-UID/xpjitd.sock "
          "without it).\n"
          "Exit status: 0 success (status: running), 1 not running or it "
          "failed,\n"
          "2 usage errors.\n",
          cli_prog);
}

/* A statistic's value: a number stays a number (an integer when it is
 * one), anything else is a string. */
static json_t *stat_value(const char *v) {
  char *end;
  errno = 0;
  long long i = strtoll(v, &end, 10);
  if (*v && !*end && !errno)
    return json_integer((json_int_t)i);
  double d = strtod(v, &end);
  if (*v && !*end && isfinite(d))
    return json_real(d);
  return cli_jstr(v);
}

/* A string value of STATS as it was before the daemon escaped it
 * (docs/protocol.md: "\\", "\n", "\xHH"), in place. */
static void stat_unescape(char *v) {
  char *o = v;
  for (const char *p = v; *p; p++) {
    if (*p != '\\' || !p[1]) {
      *o++ = *p;
    } else if (p[1] == 'n' || p[1] == '\\') {
      *o++ = p[1] == 'n' ? '\n' : '\\';
      p++;
    } else if (p[1] == 'x' && isxdigit((unsigned char)p[2]) &&
               isxdigit((unsigned char)p[3])) {
      char h[3] = {p[2], p[3], 0};
      *o++ = (char)strtol(h, NULL, 16);
      p += 3;
    } else {
      *o++ = *p;
    }
  }
  *o = 0;
}

/* "name value" lines as a JSON object, string values unescaped; NULL,
 * with why, when they are not such lines: a name not [a-z0-9_], a
 * control byte, a name twice (a daemon that did not escape a path with
 * a newline in it invented statistics: "compiles 99"), or no memory. */
static json_t *stats_json(const char *text, size_t n, char *why,
                          size_t size) {
  json_t *o = json_object();
  const char *p = text, *end = text + n;
  snprintf(why, size, "out of memory");
  bool ok = o != NULL;
  while (ok && p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    bool clean = true;
    for (size_t i = 0; clean && i < len; i++)
      clean = (unsigned char)p[i] >= 0x20 && p[i] != 0x7f;
    char *line = strndup(p, len);
    p += len + (nl ? 1 : 0);
    if (!line) {
      ok = false; /* (why: out of memory) */
      break;
    }
    char *sp = strchr(line, ' ');
    size_t nlen = sp ? (size_t)(sp - line) : 0;
    ok = clean && nlen > 0 &&
         strspn(line, "abcdefghijklmnopqrstuvwxyz0123456789_") == nlen;
    if (ok) {
      *sp = 0;
      ok = json_object_get(o, line) == NULL;
      if (!ok)
        snprintf(why, size, "the statistic %s twice", line);
    } else {
      snprintf(why, size, "a line that is not \"name value\"");
    }
    if (ok) {
      stat_unescape(sp + 1);
      ok = cli_jset(o, line, stat_value(sp + 1));
      if (!ok)
        snprintf(why, size, "out of memory");
    }
    free(line);
  }
  if (!ok) {
    json_decref(o);
    return NULL;
  }
  return o;
}

/* Running (a zombie, waiting for its parent, is not). */
static bool alive(uint64_t pid) {
  if (!pid || kill((pid_t)pid, 0) != 0)
    return false;
  char p[64], buf[512];
  snprintf(p, sizeof p, "/proc/%llu/stat", (unsigned long long)pid);
  FILE *f = fopen(p, "r");
  if (!f)
    return true;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *rp = strrchr(buf, ')');
  return !(rp && rp[1] == ' ' && rp[2] == 'Z');
}

/* One request, the payload of its reply in *pl (free it). */
static int request(int fd, xpd_op op, xpd_op want, uint8_t **pl,
                   uint32_t *len) {
  xpd_buf b = {0};
  xpd_begin(&b, op, 7);
  xpd_end(&b, 0);
  xpd_header h;
  char err[512];
  xpd_err e = xpd_call(fd, &b, XPD_MAX_REPLY, 10000, &h, pl, err, sizeof err);
  xpd_buf_free(&b);
  if (e != XPD_E_OK) {
    cli_error(NULL, "daemon: %s", err);
    return 1;
  }
  if (h.op != want) {
    char msg[512] = "";
    xpd_msg m;
    if (h.op == XPD_ERROR && xpd_payload_decode(*pl, h.len, &m) == XPD_E_OK)
      xpd_get_str(&m, XPD_F_MESSAGE, true, msg, sizeof msg);
    cli_error(NULL, "daemon: unexpected reply (operation %u) %s", h.op, msg);
    free(*pl);
    *pl = NULL;
    return 1;
  }
  *len = h.len;
  return 0;
}

typedef struct daemon_req {
  char path[108]; /* the socket */
  bool json;
  double timeout; /* stop: seconds */
  bool timeout_given;
  int fd;
  uint8_t *welcome; /* the daemon's welcome message */
  size_t wlen;
} daemon_req;

static int daemon_status(const daemon_req *r) {
  xpd_msg m;
  char vers[256] = "", cache[1024] = "";
  uint64_t proto = 0, caps = 0, pid = 0;
  if (xpd_payload_decode(r->welcome, r->wlen, &m) == XPD_E_OK) {
    xpd_get_u64(&m, XPD_F_PROTO, true, &proto);
    xpd_get_u64(&m, XPD_F_CAPS, true, &caps);
    xpd_get_u64(&m, XPD_F_PID, true, &pid);
    xpd_get_str(&m, XPD_F_VERSIONS, true, vers, sizeof vers);
    xpd_get_str(&m, XPD_F_CACHE_PATH, true, cache, sizeof cache);
  }
  char mine[128];
  xpj_versions_str(mine, sizeof mine);
  bool same = !strcmp(mine, vers);
  if (r->json)
    return cli_json_print(json_pack(
        "{s:b, s:o, s:o, s:o, s:o, s:b, s:o}", "running", 1, "pid",
        cli_jint(pid), "socket", cli_jstr(r->path), "protocol",
        cli_jint(proto), "versions", cli_jstr(vers), "compatible", same,
        "cache", cli_jstr(cache)));
  printf("xpjitd is running: pid %llu\n", (unsigned long long)pid);
  printf("socket:    %s\n", r->path);
  printf("protocol:  %llu\n", (unsigned long long)proto);
  /* the daemon's text through cli_clean, as every foreign string */
  fputs("versions:  ", stdout);
  cli_fputs_clean(stdout, vers, false);
  printf("%s\n",
         same ? "" : " (not this libxpjit's: clients compile themselves)");
  fputs("cache:     ", stdout);
  cli_fputs_clean(stdout, cache[0] ? cache : "(off or read-only)", false);
  putchar('\n');
  return 0;
}

static int daemon_stats(const daemon_req *r) {
  uint8_t *pl = NULL;
  uint32_t len = 0;
  int rc = request(r->fd, XPD_STATS, XPD_STATS_REPLY, &pl, &len);
  xpd_msg m;
  const uint8_t *t = NULL;
  size_t tn = 0;
  if (!rc && (xpd_payload_decode(pl, len, &m) != XPD_E_OK ||
              xpd_get_bytes(&m, XPD_F_TEXT, false, 1u << 20, &t, &tn) !=
                  XPD_E_OK)) {
    cli_error(NULL, "daemon: malformed statistics");
    rc = 1;
  }
  char why[256];
  json_t *o = rc ? NULL : stats_json((const char *)t, tn, why, sizeof why);
  if (!rc && !o) {
    cli_error(NULL, "daemon: malformed statistics (%s)", why);
    rc = 1;
  }
  if (!rc && r->json) {
    rc = cli_json_print(o);
    o = NULL;
  } else if (!rc) {
    char *text = malloc(tn + 1); /* the daemon's text, cleaned */
    if (text) {
      memcpy(text, t, tn);
      text[tn] = 0;
      cli_fputs_clean(stdout, text, true);
    }
    free(text);
    rc = text ? 0 : (cli_error(NULL, "out of memory"), 1);
  }
  json_decref(o);
  free(pl);
  return rc;
}

/* Whether xpjitd (pid) has stopped within timeout seconds: its socket
 * gone or refusing, and the process exited (running compiles get the
 * daemon's grace period). */
static bool stopped_within(const char *path, uint64_t pid, double timeout) {
  uint64_t until = xpd_now_ms() + (uint64_t)(timeout * 1000);
  struct stat sb;
  char err[512];
  while (xpd_now_ms() < until) {
    int t = stat(path, &sb) == 0
                ? xpd_connect(path, 500, err, sizeof err, NULL, NULL)
                : -1;
    if (t >= 0)
      close(t);
    else if (!alive(pid))
      return true;
    usleep(50000);
  }
  return false;
}

/* stop: the request, then (unless --timeout 0) the wait for the exit. */
static int daemon_stop(const daemon_req *r) {
  uint8_t *pl = NULL;
  uint32_t len = 0;
  uint64_t pid = 0;
  xpd_msg m;
  if (xpd_payload_decode(r->welcome, r->wlen, &m) == XPD_E_OK)
    xpd_get_u64(&m, XPD_F_PID, true, &pid);
  int rc = request(r->fd, XPD_SHUTDOWN, XPD_OK, &pl, &len);
  free(pl);
  if (rc)
    return rc;
  bool wait = r->timeout > 0;
  if (wait && !stopped_within(r->path, pid, r->timeout)) {
    cli_error(NULL, "xpjitd (pid %llu) did not stop within %g s",
              (unsigned long long)pid, r->timeout);
    return 1;
  }
  if (r->json)
    return cli_json_print(json_pack("{s:b, s:o}", wait ? "stopped" : "sent",
                                    1, "pid", cli_jint(pid)));
  printf("xpjitd (pid %llu) %s\n", (unsigned long long)pid,
         wait ? "stopped" : "asked to stop");
  return 0;
}

static const struct daemon_cmd {
  const char *name;
  int (*run)(const daemon_req *r);
} daemon_cmds[] = {
    {"status", daemon_status},
    {"stats", daemon_stats},
    {"stop", daemon_stop},
};

static int daemon_option(const cli_args *a, int k, daemon_req *r) {
  char *end;
  switch (k) {
  case OPT_JSON: r->json = true; return 0;
  case OPT_SOCKET:
    if (!*a->arg)
      return cli_bad_value(a, "--socket takes the daemon's socket, not ''");
    if (strlen(a->arg) >= sizeof r->path)
      return cli_bad_value(a, "socket path too long");
    snprintf(r->path, sizeof r->path, "%s", a->arg);
    return 0;
  case OPT_TIMEOUT:
    r->timeout_given = true;
    r->timeout = strtod(a->arg, &end);
    if (!*a->arg || *end || !(r->timeout >= 0 && r->timeout <= 86400))
      return cli_bad_value(a, "--timeout takes seconds from 0 to 86400, "
                              "not '%s'", a->arg);
    return 0;
  default:
    return cli_usage_error(a, "unexpected argument '%s'", a->arg);
  }
}

/* The socket: --socket, else XPJIT_DAEMON when it names a path, else the
 * default. */
static bool socket_path(daemon_req *r) {
  if (r->path[0])
    return true;
  const char *e = getenv("XPJIT_DAEMON");
  bool named = e && *e && strcmp(e, "auto") && strcmp(e, "off") &&
               strcmp(e, "0") && strcmp(e, "no");
  return named ? xpd_env_path(r->path, sizeof r->path)
               : xpd_default_path(r->path, sizeof r->path);
}

int cli_daemon(int argc, char **argv) {
  static const cli_opt opts[] = {
      {"socket", OPT_SOCKET, true},
      {"json", OPT_JSON, false},
      {"timeout", OPT_TIMEOUT, true},
      {0},
  };
  daemon_req r = {.timeout = 30, .fd = -1};
  cli_args a;
  cli_args_init(&a, "daemon", usage, opts, argc, argv);
  int rc = 0, k;
  while (!rc && (k = cli_next(&a)) > 0) /* options before the command */
    rc = daemon_option(&a, k, &r);
  if (rc || a.exited)
    return a.exited ? a.status : rc;
  if (k == CLI_DONE)
    return cli_usage_error(&a, "no command");
  const struct daemon_cmd *cmd = NULL;
  for (size_t i = 0; i < sizeof daemon_cmds / sizeof *daemon_cmds; i++)
    if (!strcmp(a.arg, daemon_cmds[i].name))
      cmd = &daemon_cmds[i];
  if (!cmd)
    return cli_usage_error(&a, "unknown command '%s'", a.arg);
  char name[32];
  snprintf(name, sizeof name, "daemon %s", cmd->name);
  int n;
  char **sub = cli_rest(&a, &n);
  cli_args_init(&a, name, usage, opts, n, sub);
  while (!rc && (k = cli_next(&a)) >= 0)
    rc = daemon_option(&a, k, &r);
  if (rc || a.exited)
    return a.exited ? a.status : rc;
  /* (status --timeout 5 was taken, and meant nothing) */
  if (r.timeout_given && cmd->run != daemon_stop)
    return cli_usage_error(&a, "--timeout belongs to stop, not %s",
                           cmd->name);
  if (!socket_path(&r)) {
    cli_error(NULL, "daemon: socket path too long");
    return 1;
  }
  char err[512];
  struct stat sb;
  r.fd = stat(r.path, &sb) == 0
             ? xpd_connect(r.path, 3000, err, sizeof err, &r.welcome, &r.wlen)
             : (snprintf(err, sizeof err, "no socket at %s", r.path), -1);
  if (r.fd < 0 && r.json && cmd->run == daemon_status) {
    cli_json_print(json_pack("{s:b, s:o, s:o}", "running", 0, "socket",
                             cli_jstr(r.path), "error", cli_jstr(err)));
    return 1;
  }
  if (r.fd < 0) {
    cli_error(NULL, "xpjitd is not running: %s", err);
    return 1;
  }
  rc = cmd->run(&r);
  free(r.welcome);
  close(r.fd);
  return rc;
}
