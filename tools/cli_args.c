/*
 * cli_args.c - how xpjit-cli reads its arguments: every command and
 * subcommand through getopt_long, the way GNU tools do (--key=value and
 * --key value, bundled short options -vj2, "--" ends the options, options
 * anywhere among the operands), with the options every command takes
 * (--help, --version, --color) handled once here; and the one parser of
 * --dtype and --const that ir, emit and bundle build share.
 */
#include "cli.h"

#include "xpjit_cache.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- options ----------------------------------------------------------- */

enum { OPT_VERSION = CLI_LONG + 200, OPT_COLOR };

static const cli_opt common_opts[] = {
    {"help", 'h', false},
    {"version", OPT_VERSION, false},
    {"color", OPT_COLOR, true},
    {0},
};

static void add_opts(cli_args *a, const cli_opt *opts, unsigned *nl,
                     size_t *ns) {
  for (const cli_opt *o = opts; o && (o->name || o->key); o++) {
    if (o->name && *nl < CLI_MAX_OPTS + 3)
      a->longs[(*nl)++] = (struct option){o->name, o->value ? 1 : 0, NULL,
                                          o->key};
    if (o->key < CLI_LONG && *ns + 2 < sizeof a->shorts) {
      a->shorts[(*ns)++] = (char)o->key;
      if (o->value)
        a->shorts[(*ns)++] = ':';
    }
  }
}

/* The long options that name (its first len bytes) starts, as
 * getopt_long takes them: an exact name is that option alone. *one: the
 * option when there is one; list (NULL: not wanted): their names. */
static unsigned prefix_matches(const cli_args *a, const char *name,
                               size_t len, const struct option **one,
                               char *list, size_t size) {
  unsigned n = 0;
  size_t used = 0;
  *one = NULL;
  if (list)
    list[0] = 0;
  for (const struct option *o = a->longs; o->name; o++)
    if (!strncmp(o->name, name, len)) {
      if (strlen(o->name) == len) { /* exact: that one */
        *one = o;
        return 1;
      }
      if (list)
        used += (size_t)snprintf(list + used, used < size ? size - used : 0,
                                 "%s--%s", n ? ", " : "", o->name);
      *one = n++ ? NULL : o;
    }
  return n;
}

/* Whether the options, up to "--", have --json (or a prefix only it has):
 * an error met before getopt_long reaches it is printed as JSON too. */
static bool json_asked(const cli_args *a) {
  for (int i = 1; i < a->argc && strcmp(a->argv[i], "--") != 0; i++) {
    const char *w = a->argv[i];
    size_t len = strncmp(w, "--", 2) ? 0 : strcspn(w + 2, "=");
    const struct option *one;
    if (len && prefix_matches(a, w + 2, len, &one, NULL, 0) == 1 &&
        !strcmp(one->name, "json"))
      return true;
  }
  return false;
}

void cli_args_init(cli_args *a, const char *cmd, void (*usage)(FILE *out),
                   const cli_opt *opts, int argc, char **argv) {
  memset(a, 0, sizeof *a);
  a->cmd = cmd;
  a->usage = usage;
  a->argc = argc;
  a->argv = argv;
  /* "-": operands are returned in order (code 1), so that they can be
   * told from the options whatever POSIXLY_CORRECT says; ":": a missing
   * value is reported apart from an unknown option */
  unsigned nl = 0;
  size_t ns = 0;
  a->shorts[ns++] = '-';
  a->shorts[ns++] = ':';
  add_opts(a, opts, &nl, &ns);
  add_opts(a, common_opts, &nl, &ns);
  a->shorts[ns] = 0;
  optind = 0; /* glibc: start a new parse */
  opterr = 0; /* our messages, not getopt's */
  if (json_asked(a))
    cli_json_wanted();
}

int cli_bad_value(const cli_args *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cli_verror(a->cmd, fmt, ap);
  va_end(ap);
  return EXIT_USAGE;
}

int cli_usage_error(const cli_args *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cli_verror(a->cmd, fmt, ap);
  va_end(ap);
  if (a->usage)
    a->usage(stderr);
  return EXIT_USAGE;
}

/* What getopt_long refused in the word at index at (the option letter
 * optopt for a short one): said, then the usage. */
static int refused(cli_args *a, int at, int k) {
  const char *word = at < a->argc ? a->argv[at] : "";
  if (strncmp(word, "--", 2) != 0) { /* a short option */
    if (k == ':')
      return cli_usage_error(a, "option '-%c' needs a value", optopt);
    return cli_usage_error(a, "unknown option '-%c'", optopt);
  }
  size_t len = strcspn(word + 2, "=");
  if (k == ':')
    return cli_usage_error(a, "option '%.*s' needs a value", (int)len + 2,
                           word);
  if (optopt) /* known, and given a value it does not take */
    return cli_usage_error(a, "option '%.*s' takes no value", (int)len + 2,
                           word);
  char list[512];
  const struct option *one;
  if (prefix_matches(a, word + 2, len, &one, list, sizeof list) > 1)
    return cli_usage_error(a, "option '%.*s' is ambiguous (%s)",
                           (int)len + 2, word, list);
  return cli_usage_error(a, "unknown option '%.*s'", (int)len + 2, word);
}

static int exit_with(cli_args *a, int status) {
  a->exited = true;
  a->status = status;
  return CLI_EXIT;
}

int cli_next(cli_args *a) {
  if (a->rest) { /* after "--": operands only */
    if (a->rest >= a->argc)
      return CLI_DONE;
    a->arg = a->argv[a->rest++];
    return CLI_OPERAND;
  }
  int at = optind ? optind : 1; /* the word getopt_long reads now */
  int k = getopt_long(a->argc, a->argv, a->shorts, a->longs, NULL);
  a->arg = optarg;
  switch (k) {
  case -1: /* the end, or "--" */
    a->rest = optind;
    return a->rest < a->argc ? cli_next(a) : CLI_DONE;
  case 1:
    return CLI_OPERAND;
  case 'h':
    a->usage(stdout);
    return exit_with(a, 0);
  case OPT_VERSION:
    printf("%s %s\n", cli_prog, xpj_version());
    return exit_with(a, 0);
  case OPT_COLOR:
    if (cli_color_set(optarg))
      return cli_next(a);
    return exit_with(a, cli_bad_value(a, "--color takes auto, always or "
                                         "never, not '%s'", optarg));
  case '?':
  case ':':
    return exit_with(a, refused(a, at, k));
  default:
    return k;
  }
}

char **cli_rest(const cli_args *a, int *argc) {
  int from = (a->rest ? a->rest : optind) - 1;
  *argc = a->argc - from;
  return a->argv + from;
}

bool cli_same_file(const char *in, const char *out) {
  struct stat a, b;
  return in && out && strcmp(out, "-") != 0 && stat(in, &a) == 0 &&
         stat(out, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* ---- temporaries removed on a signal ------------------------------------ */

#define CLI_TEMPS 16
static char temp_path[CLI_TEMPS][4200];
static volatile sig_atomic_t temp_used[CLI_TEMPS], temp_dir[CLI_TEMPS];

static void temp_signal(int sig) {
  for (int pass = 0; pass < 2; pass++) /* files, then the directories */
    for (int i = 0; i < CLI_TEMPS; i++)
      if (temp_used[i] && temp_dir[i] == pass)
        pass ? rmdir(temp_path[i]) : unlink(temp_path[i]);
  signal(sig, SIG_DFL);
  raise(sig);
}

void cli_temp_add(const char *path, bool dir) {
  static bool installed;
  if (!installed) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = temp_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    for (int s = 0; s < 3; s++) {
      int sig = s == 0 ? SIGINT : s == 1 ? SIGTERM : SIGHUP;
      struct sigaction old;
      /* (a signal the caller ignores stays ignored: nohup) */
      if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
        sigaction(sig, &sa, NULL);
    }
    installed = true;
  }
  for (int i = 0; i < CLI_TEMPS; i++)
    if (!temp_used[i]) {
      snprintf(temp_path[i], sizeof temp_path[i], "%s", path);
      temp_dir[i] = dir;
      temp_used[i] = 1;
      return;
    }
}

void cli_temp_drop(const char *path) {
  for (int i = 0; i < CLI_TEMPS; i++)
    if (temp_used[i] && !strcmp(temp_path[i], path))
      temp_used[i] = 0;
}

bool cli_is_cache_file(const char *path, const char *cache_path) {
  char dflt[4096];
  return (xpj_cache_default_path(dflt, sizeof dflt) < sizeof dflt &&
          xpj_cache_owns_file(dflt, path)) ||
         xpj_cache_owns_file(cache_path, path);
}

bool cli_output_ok(const char *who, const char *path, const char *cache_path) {
  struct stat sb;
  if (!*path) {
    cli_error(who, "the output needs a file name");
    return false;
  }
  if (!strcmp(path, "-")) {
    /* (cli_write_output takes "-" before it asks: text and binaries) */
    cli_error(who, "-: this output is an SQLite file (a bundle), which "
              "standard output cannot take: name a file");
    return false;
  }
  if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
    cli_error(who, "%s exists and is not a regular file (a link, a device, "
              "a FIFO, a directory): not replaced", path);
    return false;
  }
  if (cli_is_cache_file(path, cache_path)) {
    cli_error(who, "%s is a file of the cache: not replaced", path);
    return false;
  }
  return true;
}

int cli_write_output(const char *who, const char *path, const void *data,
                     size_t len, const char *cache_path) {
  if (!strcmp(path, "-")) {
    if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0) {
      cli_error(who, "cannot write standard output: %s", strerror(errno));
      return EXIT_INPUT;
    }
    return 0;
  }
  if (!*path) {
    cli_error(who, "-o needs a file name");
    return EXIT_INPUT;
  }
  if (!cli_output_ok(who, path, cache_path))
    return EXIT_INPUT;
  /* made new under a name nobody can guess, beside OUT (mkstemp): in a
   * directory others may write to (/tmp) a file planted under a known
   * name would be renamed over OUT still theirs (found by an outside
   * probe), and OUT.tmp.PID, the name before, let them stop the command by
   * planting anything there; a long OUT made it too long a name */
  char tmp[4200];
  const char *slash = strrchr(path, '/');
  int tn = slash ? snprintf(tmp, sizeof tmp, "%.*s/.xpjit-out-XXXXXX",
                            (int)(slash - path), path)
                 : snprintf(tmp, sizeof tmp, ".xpjit-out-XXXXXX");
  if (tn < 0 || (size_t)tn >= sizeof tmp) {
    cli_error(who, "cannot write %s: the name is too long", path);
    return EXIT_INPUT;
  }
  int fd = mkstemp(tmp);
  if (fd >= 0) { /* (mkstemp makes it 0600: as open(0666) would) */
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0) {
      int e = errno;
      close(fd);
      unlink(tmp);
      cli_error(who, "cannot write %s: %s", path, strerror(e));
      return EXIT_INPUT;
    }
  }
  cli_temp_add(tmp, false);
  bool ok = fd >= 0;
  int err = errno;
  for (size_t off = 0; ok && off < len;) {
    ssize_t w = write(fd, (const char *)data + off, len - off);
    if (w < 0 && errno == EINTR)
      continue;
    ok = w > 0;
    err = errno;
    off += ok ? (size_t)w : 0;
  }
  if (fd >= 0 && close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && rename(tmp, path) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok && fd >= 0)
    unlink(tmp);
  cli_temp_drop(tmp);
  if (!ok) {
    cli_error(who, "cannot write %s: %s", path, strerror(err));
    return EXIT_INPUT;
  }
  return 0;
}

bool cli_number(const char *s, long min, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (!*s || *end || errno || v < min || v > max)
    return false;
  *out = v;
  return true;
}

/* ---- --target and --check (emit, bundle build) -------------------------- */

bool cli_target_ok(const char *t, xpj_target *out, char *err, size_t size) {
  if (xpj_target_parse(t, out, err, size) != XPJ_OK)
    return false;
  /* cpu:NAME:LIST: the library drops an empty item (+avx2,, is +avx2);
   * on a command line one is more often a feature left out than a stray
   * comma, so the tool asks (an empty LIST is the form of no feature:
   * cpu:x86-64:) */
  const char *list = !strncmp(t, "cpu:", 4) ? strchr(t + 4, ':') : NULL;
  if (list && list[1] &&
      (list[1] == ',' || strstr(list, ",,") || t[strlen(t) - 1] == ',')) {
    snprintf(err, size, "an empty item in the CPU feature list of '%s' "
             "(cpu:NAME:+feature,-feature,...)", t);
    return false;
  }
  return true;
}

int cli_checks_value(const cli_args *a, unsigned *checks) {
  char err[256];
  if (!*a->arg) /* "" is XPJIT_CHECK unset; here a value left out */
    return cli_bad_value(a, "--check takes bounds, all or none, not ''");
  if (xpj_checks_parse(a->arg, checks, err, sizeof err) != XPJ_OK)
    return cli_bad_value(a, "%s", err);
  return 0;
}

/* ---- --dtype and --const ---------------------------------------------- */

void cli_bindings_init(cli_bindings *bs, const cli_args *a, bool lists) {
  memset(bs, 0, sizeof *bs);
  bs->args = a;
  bs->lists = lists;
}

void cli_bindings_free(cli_bindings *bs) {
  for (unsigned i = 0; i < bs->ntext; i++)
    free(bs->text[i]);
  bs->ntext = 0;
  bs->n = 0;
}

static const char *opt_name(bool is_const) {
  return is_const ? "--const" : "--dtype";
}

/* The form an option takes, for messages. */
static const char *form(const cli_bindings *bs, bool is_const) {
  if (is_const)
    return bs->lists ? "NAME=V1,V2 (e.g. TS=8,16)" : "NAME=VALUE (e.g. TS=16)";
  return bs->lists ? "NAME=T1,T2 (e.g. T=f32,f64)" : "NAME=TYPE (e.g. T=f32)";
}

/* One value checked for what the option takes. */
static int check_value(const cli_bindings *bs, bool is_const,
                       const char *v, const char *whole) {
  int64_t x;
  if (is_const && xpj_const_parse(v, XPJ_I64, &x, NULL, 0) != XPJ_OK &&
      xpj_const_parse(v, XPJ_U64, &x, NULL, 0) != XPJ_OK &&
      xpj_const_parse(v, XPJ_BOOL, &x, NULL, 0) != XPJ_OK)
    return cli_bad_value(bs->args, "--const %s: '%s' is not an integer "
                         "(decimal or 0x hexadecimal, optional sign) or "
                         "true/false", whole, v);
  if (!is_const && xpj_scalar_parse(v) == XPJ_VOID)
    return cli_bad_value(bs->args, "unknown type '%s' in --dtype %s (use "
                         "bool, i8..i64, u8..u64, f16, bf16, f32 or f64; a "
                         "const parameter takes --const %s)", v, whole,
                         bs->lists ? "NAME=V1,V2" : "NAME=VALUE");
  return 0;
}

static bool types_given(const cli_bindings *bs) {
  for (unsigned i = 0; i < bs->n; i++)
    if (!bs->b[i].is_const)
      return true;
  return false;
}

static cli_binding *find_name(cli_bindings *bs, const char *name) {
  for (unsigned i = 0; i < bs->n; i++)
    if (*bs->b[i].name && !strcmp(bs->b[i].name, name))
      return &bs->b[i];
  return NULL;
}

/* One item of an option's value: NAME=VALUE starts a binding, VALUE alone
 * binds the next type parameter or adds to the binding before it. */
static int add_item(cli_bindings *bs, bool is_const, char *item,
                    const char *whole) {
  char *eq = strchr(item, '=');
  const char *value = eq ? eq + 1 : item;
  if (!*value || (eq && eq == item) || (eq && eq - item >= 64))
    return cli_bad_value(bs->args, "%s takes %s, not '%s'",
                         opt_name(is_const), form(bs, is_const), whole);
  int rc = check_value(bs, is_const, value, whole);
  if (rc)
    return rc;
  cli_binding *to = bs->last[is_const];
  if (!eq && to) { /* another value of the binding before */
    if (!bs->lists)
      return cli_bad_value(bs->args, "%s %s gives %s more than one value; "
                           "%s takes one (bundle build takes lists)",
                           opt_name(is_const), whole, to->name,
                           bs->args->cmd);
    if (to->n == CLI_MAX_VALUES)
      return cli_bad_value(bs->args, "%s %s: more than %d values",
                           opt_name(is_const), whole, CLI_MAX_VALUES);
    to->values[to->n++] = value;
    return 0;
  }
  if (is_const && !eq)
    return cli_bad_value(bs->args, "--const takes %s, not '%s'",
                         form(bs, true), whole);
  if (!is_const && types_given(bs) && bs->positional != !eq)
    return cli_bad_value(bs->args, "--dtype %s: give the types by name "
                         "(T=f32) or by position (f32), not both", whole);
  if (bs->n == CLI_MAX_BINDINGS)
    return cli_bad_value(bs->args, "too many --dtype and --const bindings "
                         "(at most %d)", CLI_MAX_BINDINGS);
  if (eq) {
    *eq = 0;
    if (find_name(bs, item))
      return cli_bad_value(bs->args, "%s %s: '%s' is bound twice",
                           opt_name(is_const), whole, item);
  }
  if (!is_const)
    bs->positional = !eq;
  cli_binding *b = &bs->b[bs->n++];
  b->name = eq ? item : "";
  b->is_const = is_const;
  b->n = 1;
  b->values[0] = value;
  bs->last[is_const] = eq ? b : NULL;
  return 0;
}

int cli_bindings_add(cli_bindings *bs, bool is_const, const char *value) {
  if (bs->ntext == sizeof bs->text / sizeof *bs->text)
    return cli_bad_value(bs->args, "too many --dtype and --const options");
  char *copy = strdup(value);
  if (!copy)
    return cli_bad_value(bs->args, "out of memory");
  bs->text[bs->ntext++] = copy;
  /* items split in place; an empty one (a,,b or a trailing comma) is
   * malformed, as the library has it */
  char *p = copy;
  for (;;) {
    char *comma = strchr(p, ',');
    if (comma)
      *comma = 0;
    int rc = add_item(bs, is_const, p, value);
    if (rc || !comma)
      return rc;
    p = comma + 1;
  }
}

const cli_binding *cli_bindings_for(const cli_bindings *bs, const xpj_func *f,
                                    unsigned i) {
  int is_const = 0, k = xpj_func_generic_at(f, i, &is_const);
  if (k < 0)
    return NULL;
  if (!is_const && bs->positional) { /* the k-th type given */
    unsigned seen = 0;
    for (unsigned j = 0; j < bs->n; j++)
      if (!bs->b[j].is_const && seen++ == (unsigned)k)
        return &bs->b[j];
    return NULL;
  }
  const char *name = is_const ? xpj_func_const_name(f, (unsigned)k)
                              : xpj_func_tparam_name(f, (unsigned)k);
  for (unsigned j = 0; j < bs->n; j++)
    if (bs->b[j].is_const == (is_const != 0) && !strcmp(bs->b[j].name, name))
      return &bs->b[j];
  return NULL;
}

int cli_const_value(const char *name, const char *text, const xpj_func *f,
                    const char *kernel, const char *file, int64_t *out) {
  *out = 0;
  for (unsigned j = 0; f && j < xpj_func_const_count(f); j++) {
    if (strcmp(xpj_func_const_name(f, j), name))
      continue;
    char err[160];
    if (xpj_const_parse(text, xpj_func_const_type(f, j), out, err,
                        sizeof err) != XPJ_OK) {
      cli_diag(XPJ_SEV_ERROR, file, "--const %s=%s: const parameter '%s' "
               "of '%s': %s", name, text, name, kernel, err);
      return EXIT_INPUT;
    }
  }
  return 0;
}

int cli_bindings_spec(const cli_bindings *bs, const xpj_module *m,
                      const char *kernel, const char *file, unsigned ndim,
                      cli_spec *out) {
  memset(out, 0, sizeof *out);
  const xpj_func *f = xpj_module_find(m, kernel);
  unsigned nt = 0, nc = 0, pos = 0;
  for (unsigned i = 0; i < bs->n; i++) {
    const cli_binding *b = &bs->b[i];
    if (b->is_const) {
      out->const_names[nc] = b->name;
      if (cli_const_value(b->name, b->values[0], f, kernel, file,
                          &out->const_values[nc]))
        return EXIT_INPUT;
      nc++;
    } else if (*b->name) {
      out->names[nt] = b->name;
      out->types[nt++] = xpj_scalar_parse(b->values[0]);
    } else if (f) { /* by position: the next type parameter */
      unsigned have = xpj_func_tparam_count(f);
      if (pos == have) {
        cli_diag(XPJ_SEV_ERROR, file, "kernel '%s' takes %u type "
                 "parameter%s; --dtype gives more", kernel, have,
                 have == 1 ? "" : "s");
        return EXIT_INPUT;
      }
      out->names[nt] = xpj_func_tparam_name(f, pos++);
      out->types[nt++] = xpj_scalar_parse(b->values[0]);
    }
  }
  out->spec = (xpj_spec){nt,  out->names,       out->types,      ndim,
                         nc, out->const_names, out->const_values};
  return 0;
}
