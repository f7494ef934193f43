/* cli_daemon.c - xpjit-cli daemon status|stats|stop: talk to xpjitd over
 * its socket (docs/daemon.md). Exit status: 0 done (status: running), 1
 * no daemon or it failed, 2 usage. */
#include "cli.h"
#include "daemon.h"
#include "proto.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *out) {
  fprintf(out,
          "usage: %s daemon status|stats|stop [--socket PATH] [--json] "
          "[--timeout S]\n"
          "  status   is xpjitd running? its pid, versions, socket and cache\n"
          "  stats    its statistics (requests, hits, compiles, workers, ...)\n"
          "  stop     ask it to shut down and wait until it has (--timeout, "
          "default 30 s)\n"
          "The socket: --socket, else XPJIT_DAEMON when it names a path, "
          "else\n"
          "$XDG_RUNTIME_DIR/xpjit/xpjitd.sock (/tmp/xpjit-UID/xpjitd.sock "
          "without it).\n"
          "Exit status: 0 success (status: running), 1 not running or it "
          "failed,\n"
          "2 usage errors.\n",
          cli_prog);
}

static bool is_number(const char *s) {
  char *end;
  if (!*s)
    return false;
  strtod(s, &end);
  return *end == 0;
}

/* "name value" lines as a JSON object (numbers stay numbers). */
static void print_json_lines(const char *text, size_t n) {
  printf("{");
  const char *p = text, *end = text + n;
  bool first = true;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    char line[2048];
    if (len >= sizeof line)
      len = sizeof line - 1;
    memcpy(line, p, len);
    line[len] = 0;
    p += len + (nl ? 1 : 0);
    char *sp = strchr(line, ' ');
    if (!sp)
      continue;
    *sp = 0;
    printf("%s", first ? "" : ", ");
    first = false;
    cli_json_str(stdout, line);
    printf(": ");
    if (is_number(sp + 1))
      printf("%s", sp + 1);
    else
      cli_json_str(stdout, sp + 1);
  }
  printf("}\n");
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
    fprintf(stderr, "%s: daemon: %s\n", cli_prog, err);
    return 1;
  }
  if (h.op != want) {
    char msg[512] = "";
    xpd_msg m;
    if (h.op == XPD_ERROR && xpd_payload_decode(*pl, h.len, &m) == XPD_E_OK)
      xpd_get_str(&m, XPD_F_MESSAGE, true, msg, sizeof msg);
    fprintf(stderr, "%s: daemon: unexpected reply (operation %u) %s\n",
            cli_prog, h.op, msg);
    free(*pl);
    *pl = NULL;
    return 1;
  }
  *len = h.len;
  return 0;
}

int cli_daemon(int argc, char **argv) {
  if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
    usage(argc < 1 ? stderr : stdout);
    return argc < 1 ? 2 : 0;
  }
  const char *cmd = argv[0];
  if (strcmp(cmd, "status") && strcmp(cmd, "stats") && strcmp(cmd, "stop")) {
    fprintf(stderr, "%s: daemon: unknown command '%s'\n", cli_prog, cmd);
    usage(stderr);
    return 2;
  }
  char path[108] = "";
  bool json = false;
  double timeout = 30;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strcmp(argv[i], "--socket") && i + 1 < argc) {
      if (strlen(argv[++i]) >= sizeof path) {
        fprintf(stderr, "%s: daemon: socket path too long\n", cli_prog);
        return 2;
      }
      snprintf(path, sizeof path, "%s", argv[i]);
    } else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
      char *end;
      timeout = strtod(argv[++i], &end);
      if (*end || timeout < 0 || timeout > 86400) {
        fprintf(stderr, "%s: daemon: bad --timeout '%s'\n", cli_prog,
                argv[i]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "%s: daemon: unknown option '%s'\n", cli_prog,
              argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (!path[0]) {
    const char *e = getenv("XPJIT_DAEMON");
    bool named = e && *e && strcmp(e, "auto") && strcmp(e, "off") &&
                 strcmp(e, "0") && strcmp(e, "no");
    if (!(named ? xpd_env_path(path, sizeof path)
                : xpd_default_path(path, sizeof path))) {
      fprintf(stderr, "%s: daemon: socket path too long\n", cli_prog);
      return 1;
    }
  }
  char err[512];
  uint8_t *wp = NULL;
  size_t wl = 0;
  struct stat sb;
  int fd = stat(path, &sb) == 0
               ? xpd_connect(path, 3000, err, sizeof err, &wp, &wl)
               : (snprintf(err, sizeof err, "no socket at %s", path), -1);
  if (fd < 0) {
    if (json && !strcmp(cmd, "status")) {
      printf("{\"running\": false, \"socket\": ");
      cli_json_str(stdout, path);
      printf(", \"error\": ");
      cli_json_str(stdout, err);
      printf("}\n");
    } else {
      fprintf(stderr, "%s: xpjitd is not running: %s\n", cli_prog, err);
    }
    return 1;
  }
  int rc = 0;
  if (!strcmp(cmd, "status")) {
    xpd_msg m;
    char vers[256] = "", cache[1024] = "";
    uint64_t proto = 0, caps = 0, pid = 0;
    if (xpd_payload_decode(wp, wl, &m) == XPD_E_OK) {
      xpd_get_u64(&m, XPD_F_PROTO, true, &proto);
      xpd_get_u64(&m, XPD_F_CAPS, true, &caps);
      xpd_get_u64(&m, XPD_F_PID, true, &pid);
      xpd_get_str(&m, XPD_F_VERSIONS, true, vers, sizeof vers);
      xpd_get_str(&m, XPD_F_CACHE_PATH, true, cache, sizeof cache);
    }
    char mine[128];
    xpj_versions_str(mine, sizeof mine);
    bool same = !strcmp(mine, vers);
    if (json) {
      printf("{\"running\": true, \"pid\": %llu, \"socket\": ",
             (unsigned long long)pid);
      cli_json_str(stdout, path);
      printf(", \"protocol\": %llu, \"versions\": ", (unsigned long long)proto);
      cli_json_str(stdout, vers);
      printf(", \"compatible\": %s, \"cache\": ", same ? "true" : "false");
      cli_json_str(stdout, cache);
      printf("}\n");
    } else {
      printf("xpjitd is running: pid %llu\n", (unsigned long long)pid);
      printf("socket:    %s\n", path);
      printf("protocol:  %llu\n", (unsigned long long)proto);
      printf("versions:  %s%s\n", vers,
             same ? "" : " (not this libxpjit's: clients compile themselves)");
      printf("cache:     %s\n", cache[0] ? cache : "(off or read-only)");
    }
  } else if (!strcmp(cmd, "stats")) {
    uint8_t *pl = NULL;
    uint32_t len = 0;
    rc = request(fd, XPD_STATS, XPD_STATS_REPLY, &pl, &len);
    if (!rc) {
      xpd_msg m;
      const uint8_t *t = NULL;
      size_t tn = 0;
      if (xpd_payload_decode(pl, len, &m) != XPD_E_OK ||
          xpd_get_bytes(&m, XPD_F_TEXT, false, 1u << 20, &t, &tn) !=
              XPD_E_OK) {
        fprintf(stderr, "%s: daemon: malformed statistics\n", cli_prog);
        rc = 1;
      } else if (json) {
        print_json_lines((const char *)t, tn);
      } else {
        fwrite(t, 1, tn, stdout);
      }
    }
    free(pl);
  } else { /* stop */
    uint8_t *pl = NULL;
    uint32_t len = 0;
    uint64_t pid = 0;
    xpd_msg m;
    if (xpd_payload_decode(wp, wl, &m) == XPD_E_OK)
      xpd_get_u64(&m, XPD_F_PID, true, &pid);
    rc = request(fd, XPD_SHUTDOWN, XPD_OK, &pl, &len);
    free(pl);
    if (!rc) {
      /* it has stopped when the socket is gone or refuses and the process
       * has exited (running compiles get the daemon's grace period) */
      uint64_t until = xpd_now_ms() + (uint64_t)(timeout * 1000);
      bool gone = false;
      while (!gone && xpd_now_ms() < until) {
        int t = stat(path, &sb) == 0
                    ? xpd_connect(path, 500, err, sizeof err, NULL, NULL)
                    : -1;
        if (t < 0)
          gone = !alive(pid);
        else
          close(t);
        if (!gone)
          usleep(50000);
      }
      if (!gone) {
        fprintf(stderr, "%s: xpjitd (pid %llu) did not stop within %.0f s\n",
                cli_prog, (unsigned long long)pid, timeout);
        rc = 1;
      } else if (json) {
        printf("{\"stopped\": true, \"pid\": %llu}\n",
               (unsigned long long)pid);
      } else {
        printf("xpjitd (pid %llu) stopped\n", (unsigned long long)pid);
      }
    }
  }
  free(wp);
  close(fd);
  return rc;
}
