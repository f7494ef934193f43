/* test_runtime.c - the runtime API itself, on the CPU device: device
 * filters and the visible set, memory (sizes, alignment, frees, queries),
 * queues and events (order, profiling, errors raised in a command, waits
 * across queues, destroy draining work), programs and kernel metadata, and
 * thread safety (concurrent get_kernel, concurrent enqueues). The kernels'
 * results are the conformance suite's job (test_conformance.c). */
#define _GNU_SOURCE /* pthread_getattr_np */
#include "procutil.h" /* guarded_test */
#include "rt.h" /* rt_main_stack_low */
#include "testutil.h"
#include "xpjit.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static xpj_context *ctx;
static xpj_device *cpu;

static int setup(void **state) {
  (void)state;
  unsetenv("XPJIT_DEVICE");
  if (xpj_context_create(NULL, &ctx) != XPJ_OK)
    return -1;
  return xpj_device_select(ctx, "cpu", &cpu) == XPJ_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  xpj_context_destroy(ctx);
  return 0;
}

#define assert_msg_has(s)                                                     \
  do {                                                                        \
    if (!strstr(xpj_last_error(), (s)))                                       \
      fail_msg("message \"%s\" lacks \"%s\"", xpj_last_error(), (s));         \
  } while (0)

/* ---- forked children (procutil.h) --------------------------------------- */

/* A forked child that fails a check returns into cmocka's runner in the
 * child. Every test here is a guarded_test, as every test of a file that
 * forks is: the guard ends such a child at this test's teardown, exit
 * status CHILD_ESCAPED, and it starts no other test (its output, written
 * unbuffered, has its failure and no "[ RUN" line after it). Without the
 * guard it runs the tests after this one: an alarm ends it. */
static void test_escaped_child(void **state) {
  (void)state;
  char out[] = "/tmp/xpjit-escaped-XXXXXX";
  int fd = mkstemp(out);
  assert_true(fd >= 0);
  unlink(out);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    alarm(30);
    if (dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
      _exit(1);
    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("CMOCKA_MESSAGE_OUTPUT", "STDOUT", 1); /* "[ RUN" per test */
    fail_msg("a deliberate failure in a forked child");
  }
  int ws = 0;
  pid_t got = waitpid(pid, &ws, 0);
  char text[8192];
  ssize_t n = pread(fd, text, sizeof text - 1, 0);
  close(fd);
  assert_int_equal(got, pid);
  assert_true(n > 0);
  text[n] = 0;
  assert_non_null(strstr(text, "a deliberate failure in a forked child"));
  if (strstr(text, "[ RUN"))
    fail_msg("the forked child ran other tests:\n%s", text);
  assert_true(WIFEXITED(ws));
  assert_int_equal(WEXITSTATUS(ws), CHILD_ESCAPED);
}

/* ---- devices ---------------------------------------------------------- */

static unsigned count(const char *filter, xpj_status *st) {
  unsigned n = 99;
  *st = xpj_device_list(ctx, filter, NULL, 0, &n);
  return n;
}

static void test_filters(void **state) {
  (void)state;
  xpj_status st;
  const char *one[] = {"cpu", "cpu:0", "native_cpu", "*", "*:cpu", "cpu:*",
                       "cpu:cpu", "cpu:0,1", "cuda;cpu", "!cuda", "!gpu",
                       "*:0", "cpu;!cuda:1", NULL};
  for (int i = 0; one[i]; i++) {
    assert_int_equal(count(one[i], &st), 1);
    assert_int_equal(st, XPJ_OK);
  }
  const char *none[] = {"cuda",   "cuda:0",  "level_zero:gpu", "opencl:cpu",
                        "gpu",    "cpu:1",   "cpu:gpu",        "!cpu",
                        "*:acc",  "cpu;!*",  "opencl",         "fpga",
                        NULL};
  for (int i = 0; none[i]; i++) {
    assert_int_equal(count(none[i], &st), 0);
    assert_int_equal(st, XPJ_OK);
  }
  const char *bad[] = {"cpu:",  "foo",   "cpu;;cuda", ";",     "cpu:x",
                       "cuda:-1", "cpu :0", "cpu:0,",   "gpu:0", "!",
                       "cpu:99999999999", "\x01", NULL};
  for (int i = 0; bad[i]; i++) {
    count(bad[i], &st);
    if (st != XPJ_ERR_INVALID)
      fail_msg("filter \"%s\" accepted", bad[i]);
    assert_msg_has("device filter");
  }
  xpj_device *d = NULL;
  assert_int_equal(xpj_device_select(ctx, "cuda:0", &d), XPJ_ERR_NOT_FOUND);
  assert_null(d);
  assert_msg_has("no device matches \"cuda:0\"");
  assert_msg_has("cpu:0");
  assert_int_equal(xpj_device_select(ctx, NULL, &d), XPJ_OK);
  assert_ptr_equal(d, cpu);
  assert_string_equal(xpj_device_id(cpu), "cpu:0");
  assert_int_equal(xpj_device_count(ctx), 1);
  assert_ptr_equal(xpj_device_get(ctx, 0), cpu);
  assert_null(xpj_device_get(ctx, 1));
}

static void test_visible(void **state) {
  (void)state;
  xpj_context *c = NULL;
  xpj_context_desc desc = {.visible = "cuda"};
  assert_int_equal(xpj_context_create(&desc, &c), XPJ_OK);
  assert_int_equal(xpj_device_count(c), 0);
  xpj_device *d;
  assert_int_equal(xpj_device_select(c, NULL, &d), XPJ_ERR_NOT_FOUND);
  assert_msg_has("visible devices: none");
  xpj_context_destroy(c);

  setenv("XPJIT_DEVICE", "!cpu", 1);
  assert_int_equal(xpj_context_create(NULL, &c), XPJ_OK);
  assert_int_equal(xpj_device_count(c), 0);
  xpj_context_destroy(c);
  setenv("XPJIT_DEVICE", "cpu:", 1);
  assert_int_equal(xpj_context_create(NULL, &c), XPJ_ERR_INVALID);
  assert_null(c);
  assert_msg_has("XPJIT_DEVICE");
  setenv("XPJIT_DEVICE", "cpu", 1);
  xpj_context_desc three = {.cpu_threads = 3};
  assert_int_equal(xpj_context_create(&three, &c), XPJ_OK);
  xpj_device_info in;
  assert_int_equal(xpj_device_get_info(xpj_device_get(c, 0), &in), XPJ_OK);
  assert_int_equal(in.compute_units, 3);
  xpj_context_destroy(c);
  unsetenv("XPJIT_DEVICE");
  xpj_context_destroy(NULL);
}

static void test_device_info(void **state) {
  (void)state;
  xpj_device_info in;
  assert_int_equal(xpj_device_get_info(cpu, &in), XPJ_OK);
  assert_true(in.name[0] && in.vendor[0] && in.driver_version[0]);
  assert_int_equal(in.backend, XPJ_BACKEND_CPU);
  assert_int_equal(in.type, XPJ_DEVICE_CPU);
  assert_true(in.compute_units >= 1);
  assert_true(in.max_work_group_size >= 256);
  assert_true(in.local_mem_size >= 32768);
  assert_true(in.global_mem_size > ((uint64_t)1 << 28));
  assert_true(!strncmp(in.target, "cpu:", 4));
  /* the name and vendor are what /proc/cpuinfo says of the first
   * processor (cpu.c takes them from CPUID where it can) */
  FILE *ci = fopen("/proc/cpuinfo", "r");
  char line[512], model[256] = "", vendor[64] = "";
  while (ci && fgets(line, sizeof line, ci) && (!model[0] || !vendor[0])) {
    char *colon = strchr(line, ':');
    char *out = !colon ? NULL
                : !strncmp(line, "model name", 10) ? model
                : !strncmp(line, "vendor_id", 9)   ? vendor
                                                   : NULL;
    if (!out || out[0])
      continue;
    snprintf(out, out == model ? sizeof model : sizeof vendor, "%s",
             colon + 1 + strspn(colon + 1, " \t"));
    out[strcspn(out, "\n")] = 0;
  }
  if (ci)
    fclose(ci);
  if (model[0])
    assert_string_equal(in.name, model);
  if (!strcmp(vendor, "GenuineIntel"))
    assert_string_equal(in.vendor, "Intel");
  else if (!strcmp(vendor, "AuthenticAMD"))
    assert_string_equal(in.vendor, "AMD");
  else if (vendor[0])
    assert_string_equal(in.vendor, vendor);
  /* the target string round-trips through the compiler's parser */
  xpj_target t;
  char err[128], back[sizeof in.target];
  assert_int_equal(xpj_target_parse("cpu", &t, err, sizeof err), XPJ_OK);
  xpj_target_str(&t, back, sizeof back);
  assert_string_equal(back, in.target);
  assert_string_equal(xpj_backend_name(XPJ_BACKEND_LEVEL_ZERO), "level_zero");
  assert_int_equal(xpj_device_get_info(NULL, &in), XPJ_ERR_INVALID);
}

/* ---- memory ----------------------------------------------------------- */

static void test_memory(void **state) {
  (void)state;
  void *p = (void *)1;
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_SHARED, 0, 0, &p),
                   XPJ_ERR_INVALID);
  assert_null(p);
  assert_msg_has("size is 0");
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_SHARED, 64, 3, &p),
                   XPJ_ERR_INVALID);
  assert_msg_has("power of two");
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_SHARED, SIZE_MAX, 0, &p),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_mem_alloc(cpu, (xpj_mem_kind)7, 64, 0, &p),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_mem_alloc(NULL, XPJ_MEM_SHARED, 64, 0, &p),
                   XPJ_ERR_INVALID);

  void *a[3];
  xpj_mem_kind kinds[3] = {XPJ_MEM_DEVICE, XPJ_MEM_HOST, XPJ_MEM_SHARED};
  size_t aligns[3] = {0, 4096, 128};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(xpj_mem_alloc(cpu, kinds[i], 1000 + i, aligns[i], &a[i]),
                     XPJ_OK);
    assert_int_equal((uintptr_t)a[i] % (aligns[i] ? aligns[i] : 64), 0);
    memset(a[i], i, 1000 + i);
  }
  void *base;
  size_t bytes;
  xpj_mem_kind kind;
  assert_int_equal(
      xpj_mem_query(cpu, (char *)a[1] + 999, &base, &bytes, &kind), XPJ_OK);
  assert_ptr_equal(base, a[1]);
  assert_int_equal(bytes, 1001);
  assert_int_equal(kind, XPJ_MEM_HOST);
  assert_int_equal(xpj_mem_query(cpu, (char *)a[1] + 1001, &base, NULL, NULL),
                   XPJ_ERR_NOT_FOUND);
  int local;
  assert_int_equal(xpj_mem_query(cpu, &local, NULL, NULL, NULL),
                   XPJ_ERR_NOT_FOUND);
  /* only the start of an allocation can be freed, once */
  assert_int_equal(xpj_mem_free(cpu, (char *)a[0] + 8), XPJ_ERR_INVALID);
  assert_msg_has("inside the allocation at");
  assert_msg_has("not its start");
  assert_int_equal(xpj_mem_free(cpu, &local), XPJ_ERR_INVALID);
  assert_msg_has("is no allocation of");
  for (int i = 0; i < 3; i++)
    assert_int_equal(xpj_mem_free(cpu, a[i]), XPJ_OK);
  /* twice: said as such ("not the start of an allocation" before) */
  assert_int_equal(xpj_mem_free(cpu, a[0]), XPJ_ERR_INVALID);
  assert_msg_has("freed already");
  assert_int_equal(xpj_mem_free(cpu, NULL), XPJ_OK);
  /* alignments below a pointer's, sizes that are no multiple of one: the
   * CPU device asked aligned_alloc for 8-byte alignment and a size
   * rounded to the caller's alignment only (1 byte at 8: C11 leaves it
   * undefined, and AddressSanitizer aborts on it; found probing the C
   * API). Fails only under a sanitizer, as glibc takes it. */
  for (size_t al = 1; al <= 8; al *= 2)
    for (size_t n = 1; n <= 9; n += 4) {
      assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_HOST, n, al, &p), XPJ_OK);
      assert_int_equal((uintptr_t)p % al, 0);
      memset(p, 1, n);
      assert_int_equal(xpj_mem_free(cpu, p), XPJ_OK);
    }
}

/* ---- queues and events -------------------------------------------------- */

static void test_copy_fill(void **state) {
  (void)state;
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(cpu, NULL, &q), XPJ_OK);
  uint8_t *a, *b;
  /* aligned for the largest pattern */
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_DEVICE, 4096, 128, (void **)&a),
                   XPJ_OK);
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_SHARED, 4096, 0, (void **)&b),
                   XPJ_OK);
  uint8_t pat[128];
  for (int i = 0; i < 128; i++)
    pat[i] = (uint8_t)(i * 7 + 1);
  for (size_t ps = 1; ps <= 128; ps *= 2) {
    size_t n = 4096 - 4 * ps; /* a multiple of ps, not of 4096 */
    assert_int_equal(xpj_enqueue_fill(q, a, pat, ps, n, NULL), XPJ_OK);
    assert_int_equal(xpj_enqueue_copy(q, b, a, n, NULL), XPJ_OK);
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    for (size_t i = 0; i < n; i++)
      if (b[i] != pat[i % ps])
        fail_msg("fill pattern %zu: byte %zu is %u", ps, i, b[i]);
  }
  assert_int_equal(xpj_enqueue_fill(q, a, pat, 3, 9, NULL), XPJ_ERR_INVALID);
  assert_int_equal(xpj_enqueue_fill(q, a, pat, 4, 10, NULL), XPJ_ERR_INVALID);
  assert_msg_has("multiple of the pattern size");
  assert_int_equal(xpj_enqueue_fill(q, a + 2, pat, 4, 8, NULL),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_enqueue_fill(q, a, pat, 4, 8192, NULL),
                   XPJ_ERR_INVALID);
  assert_msg_has("past the end");
  assert_int_equal(xpj_enqueue_copy(q, b, a, 4097, NULL), XPJ_ERR_INVALID);
  assert_int_equal(xpj_enqueue_copy(q, a + 10, a, 100, NULL), XPJ_ERR_INVALID);
  assert_msg_has("overlap");
  assert_int_equal(xpj_enqueue_copy(q, NULL, a, 1, NULL), XPJ_ERR_INVALID);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  xpj_mem_free(cpu, a);
  xpj_mem_free(cpu, b);
  xpj_queue_destroy(q);
  xpj_queue_destroy(NULL);
}

typedef struct order_state {
  int seen[64];
  int n;
} order_state;

static order_state order;
static int record(void *p) {
  order.seen[order.n++] = (int)(intptr_t)p;
  return 0;
}
static int fail_with_7(void *p) {
  (void)p;
  return 7;
}
static int slow(void *p) {
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  *(int *)p = 1;
  return 0;
}

static void test_events(void **state) {
  (void)state;
  xpj_queue *q, *q2;
  xpj_queue_desc prof = {.flags = XPJ_QUEUE_PROFILING};
  assert_int_equal(xpj_queue_create(cpu, &prof, &q), XPJ_OK);
  assert_int_equal(xpj_queue_create(cpu, NULL, &q2), XPJ_OK);
  xpj_queue_desc badf = {.flags = 0x80};
  xpj_queue *qx = (xpj_queue *)1;
  assert_int_equal(xpj_queue_create(cpu, &badf, &qx), XPJ_ERR_INVALID);
  assert_null(qx);

  /* in order */
  order.n = 0;
  for (intptr_t i = 0; i < 64; i++)
    assert_int_equal(xpj_enqueue_host_task(q, record, (void *)i, NULL),
                     XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  assert_int_equal(order.n, 64);
  for (int i = 0; i < 64; i++)
    assert_int_equal(order.seen[i], i);

  /* profiling */
  xpj_event *e = NULL;
  int flag = 0;
  assert_int_equal(xpj_enqueue_host_task(q, slow, &flag, &e), XPJ_OK);
  assert_non_null(e);
  assert_int_equal(xpj_event_wait(e), XPJ_OK);
  assert_int_equal(flag, 1);
  assert_int_equal(xpj_event_query(e), XPJ_EVENT_COMPLETE);
  uint64_t tq, ts, te;
  assert_int_equal(xpj_event_profile(e, &tq, &ts, &te), XPJ_OK);
  assert_true(tq <= ts && ts < te);
  assert_true(te - ts >= 15 * 1000 * 1000);
  xpj_event_release(e);

  /* a failing command fails its event and the next wait, once */
  xpj_event *bad = NULL, *after = NULL;
  order.n = 0;
  assert_int_equal(xpj_enqueue_host_task(q, fail_with_7, NULL, &bad), XPJ_OK);
  assert_int_equal(xpj_enqueue_host_task(q, record, (void *)0, &after),
                   XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_ERR_DEVICE);
  assert_msg_has("host task failed with 7");
  assert_int_equal(xpj_event_query(bad), XPJ_EVENT_FAILED);
  assert_int_equal(xpj_event_wait(bad), XPJ_ERR_DEVICE);
  assert_msg_has("failed with 7");
  assert_int_equal(xpj_event_wait(after), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);

  /* q2 waits for a slow command of q; a failed event fails the waiter */
  flag = 0;
  xpj_event *s = NULL, *w = NULL;
  assert_int_equal(xpj_enqueue_host_task(q, slow, &flag, &s), XPJ_OK);
  assert_int_equal(xpj_enqueue_wait_events(q2, 1, &s, NULL), XPJ_OK);
  order.n = 0;
  assert_int_equal(xpj_enqueue_host_task(q2, record, (void *)5, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q2), XPJ_OK);
  assert_int_equal(flag, 1);
  assert_int_equal(order.n, 1);
  xpj_event_release(s);
  assert_int_equal(xpj_enqueue_wait_events(q2, 1, &bad, &w), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q2), XPJ_ERR_DEVICE);
  assert_msg_has("waited for failed");
  assert_int_equal(xpj_event_query(w), XPJ_EVENT_FAILED);
  xpj_event_release(w);
  xpj_event_release(bad);
  xpj_event_release(after);
  xpj_event *null_ev[1] = {NULL};
  assert_int_equal(xpj_enqueue_wait_events(q2, 1, null_ev, NULL),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_enqueue_host_task(q2, NULL, NULL, NULL),
                   XPJ_ERR_INVALID);

  /* without profiling there are no timestamps */
  order.n = 0;
  assert_int_equal(xpj_enqueue_host_task(q2, record, (void *)0, &e), XPJ_OK);
  assert_int_equal(xpj_event_wait(e), XPJ_OK);
  assert_int_equal(xpj_event_profile(e, &tq, &ts, &te), XPJ_ERR_INVALID);
  xpj_event_release(e);
  xpj_event_release(NULL);

  /* destroy drains: the slow task has run when destroy returns */
  flag = 0;
  assert_int_equal(xpj_enqueue_host_task(q2, slow, &flag, NULL), XPJ_OK);
  xpj_queue_destroy(q2);
  assert_int_equal(flag, 1);
  xpj_queue_destroy(q);
}

/* ---- programs and kernels ------------------------------------------------ */

static const char src[] =
    "const N: i64 = 64;\n"
    "fn twice<T>(x: T) -> T { return x + x; }\n"
    "kernel scale<T>(a: T, x: global T[*], flag: bool) range {\n"
    "  let i = global_id(0);\n"
    "  if i < size(x) && flag { x[i] = twice(a * x[i]); }\n"
    "}\n"
    "kernel grid(out: global i64[,]) ndrange(2) {\n"
    "  local t: i64[N];\n"
    "  t[local_linear_id()] = group_linear_id();\n"
    "  barrier();\n"
    "  out[global_id(0), global_id(1)] = t[local_linear_id()] * 1000 + "
    "local_linear_id();\n"
    "}\n"
    "kernel huge(out: global f32[]) ndrange(1) {\n"
    "  local t: f32[1048576];\n"
    "  t[local_id(0)] = 1.0;\n"
    "  barrier();\n"
    "  out[global_id(0)] = t[0];\n"
    "}\n";

static void test_program(void **state) {
  (void)state;
  xpj_program *p = NULL;
  const char *broken = "kernel k(x: global f32[]) range {\n  x[0] = ;\n}\n";
  xpj_diags *d;
  assert_int_equal(xpj_diags_create(&d), XPJ_OK);
  assert_int_equal(
      xpj_program_create(ctx, "broken.xpk", broken, strlen(broken), d, &p),
      XPJ_ERR_SYNTAX);
  assert_null(p);
  assert_msg_has("broken.xpk:2:");
  assert_msg_has("^");
  assert_true(xpj_diags_errors(d) > 0);
  xpj_diags_destroy(d);
  assert_int_equal(xpj_program_create_file(ctx, "/nonexistent/k.xpk", NULL, &p),
                   XPJ_ERR_IO);
  assert_msg_has("/nonexistent/k.xpk");
  xpj_program_destroy(NULL);
  /* NULL arguments, named by the function they were given to */
  assert_int_equal(xpj_program_create_file(NULL, "k.xpk", NULL, &p),
                   XPJ_ERR_INVALID);
  assert_msg_has("xpj_program_create_file: the context is NULL");
  assert_int_equal(xpj_program_create(NULL, "t", "", 0, NULL, &p),
                   XPJ_ERR_INVALID);
  assert_msg_has("xpj_program_create: the context is NULL");
  assert_int_equal(xpj_program_create(ctx, "t", NULL, 4, NULL, &p),
                   XPJ_ERR_INVALID);
  assert_msg_has("src is NULL");
  assert_int_equal(xpj_program_create_file(ctx, "k.xpk", NULL, NULL),
                   XPJ_ERR_INVALID);
  assert_msg_has("xpj_program_create_file: out is NULL");

  assert_int_equal(xpj_program_create(ctx, "t.xpk", src, strlen(src), NULL, &p),
                   XPJ_OK);
  assert_int_equal(xpj_program_kernel_count(p), 3);
  assert_string_equal(xpj_program_kernel_name(p, 0), "scale");
  assert_null(xpj_program_kernel_name(p, 3));

  xpj_kernel *k = NULL, *k2 = NULL;
  assert_int_equal(xpj_program_get_kernel(p, "nope", "T=f32", 1, cpu, NULL, &k),
                   XPJ_ERR_NOT_FOUND);
  assert_msg_has("kernels: scale, grid, huge");
  assert_int_equal(xpj_program_get_kernel(p, "twice", "T=f32", 0, cpu, NULL, &k),
                   XPJ_ERR_NOT_FOUND);
  assert_msg_has("device function");
  const char *bad_dtypes[] = {"T=f128", "U=f32", "f32,f64", "T=f32,T=f64", "",
                              "T=", ",", "T=f32,", NULL};
  for (int i = 0; bad_dtypes[i]; i++) {
    assert_int_equal(
        xpj_program_get_kernel(p, "scale", bad_dtypes[i], 1, cpu, NULL, &k),
        XPJ_ERR_SPECIALIZE);
    assert_null(k);
  }
  assert_int_equal(xpj_program_get_kernel(p, "scale", "T=f32", 0, cpu, NULL, &k),
                   XPJ_ERR_SPECIALIZE);
  assert_msg_has("give ndim");
  assert_int_equal(xpj_program_get_kernel(p, "scale", "T=bool", 1, cpu, NULL, &k),
                   XPJ_ERR_SPECIALIZE);

  assert_int_equal(xpj_program_get_kernel(p, "scale", "f64", 2, cpu, NULL, &k),
                   XPJ_OK);
  assert_int_equal(
      xpj_program_get_kernel(p, "scale", "T=f64", 2, cpu, NULL, &k2), XPJ_OK);
  assert_ptr_equal(k, k2); /* positional and named are the same kernel */
  assert_int_equal(
      xpj_program_get_kernel(p, "scale", "T=f64", 1, cpu, NULL, &k2), XPJ_OK);
  assert_ptr_not_equal(k, k2);
  xpj_compile_opts o;
  xpj_compile_opts_default(&o);
  o.opt_level = 3;
  o.fast_math = 1;
  assert_int_equal(xpj_program_get_kernel(p, "scale", "T=f64", 2, cpu, &o, &k2),
                   XPJ_OK);
  assert_ptr_not_equal(k, k2);
  o.opt_level = 9;
  assert_int_equal(xpj_program_get_kernel(p, "scale", "T=f64", 2, cpu, &o, &k2),
                   XPJ_ERR_INVALID);
  /* an isolation that is none of the enum's: refused as opt_level is (it
   * was accepted, and compiled as the default) */
  static const int bad_isolation[] = {77, -1, 2};
  for (int i = 0; i < 3; i++) {
    xpj_compile_opts_default(&o);
    o.isolation = (xpj_isolation)bad_isolation[i];
    assert_int_equal(
        xpj_program_get_kernel(p, "scale", "T=f64", 2, cpu, &o, &k2),
        XPJ_ERR_INVALID);
    assert_msg_has("unknown isolation");
    size_t bsize = 0;
    assert_int_equal(xpj_program_get_binary(p, "scale", "T=f64", 2, "cpu", &o,
                                            NULL, &bsize),
                     XPJ_ERR_INVALID);
    assert_msg_has("unknown isolation");
  }

  xpj_kernel_info ki;
  assert_int_equal(xpj_kernel_get_info(k, &ki), XPJ_OK);
  assert_string_equal(ki.name, "scale");
  assert_int_equal(ki.kind, XPJ_FUNC_RANGE);
  assert_int_equal(ki.dims, 0);
  assert_int_equal(ki.nargs, 3);
  assert_true(!strncmp(ki.target, "cpu:", 4));
  xpj_kernel_arg_info ai;
  assert_int_equal(xpj_kernel_get_arg_info(k, 1, &ai), XPJ_OK);
  assert_string_equal(ai.name, "x");
  assert_int_equal(ai.kind, XPJ_ARG_ARRAY);
  assert_int_equal(ai.dtype, XPJ_F64);
  assert_int_equal(ai.rank, 2);
  assert_false(ai.is_const);
  assert_int_equal(xpj_kernel_get_arg_info(k, 2, &ai), XPJ_OK);
  assert_int_equal(ai.kind, XPJ_ARG_SCALAR);
  assert_int_equal(ai.dtype, XPJ_BOOL);
  assert_int_equal(xpj_kernel_get_arg_info(k, 3, &ai), XPJ_ERR_INVALID);
  assert_non_null(strstr(xpj_kernel_signature(k), "scale(a: f64, x: global f64[,], flag: bool)"));

  /* run it on a transposed 2-D view with the flag on and off */
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(cpu, NULL, &q), XPJ_OK);
  double *x;
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_SHARED, 6 * sizeof *x, 0,
                                 (void **)&x), XPJ_OK);
  for (int i = 0; i < 6; i++)
    x[i] = i + 1;
  xpj_array v = {x, XPJ_F64, 2, 0, {3, 2}, {1, 3}}; /* transpose of 2x3 */
  xpj_arg args[] = {xpj_arg_f64(0.5), xpj_arg_array(&v), xpj_arg_bool(1)};
  xpj_range r = xpj_range_1d(6, 0);
  assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_OK);
  args[2] = xpj_arg_bool(0);
  assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  for (int i = 0; i < 6; i++)
    assert_true(x[i] == i + 1.0); /* twice(0.5 * x) == x */

  /* nd-range ids with the runtime's choice of local size */
  xpj_kernel *g;
  assert_int_equal(xpj_program_get_kernel(p, "grid", NULL, 0, cpu, NULL, &g),
                   XPJ_OK);
  assert_int_equal(xpj_kernel_get_info(g, &ki), XPJ_OK);
  assert_int_equal(ki.kind, XPJ_FUNC_NDRANGE);
  assert_int_equal(ki.dims, 2);
  assert_int_equal(ki.local_mem_bytes, 64 * 8);
  uint64_t gl[2] = {8, 12}, lo[2];
  assert_int_equal(xpj_kernel_suggest_local(g, 2, gl, lo), XPJ_OK);
  assert_true(gl[0] % lo[0] == 0 && gl[1] % lo[1] == 0);
  int64_t *out;
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_SHARED, 96 * sizeof *out, 0,
                                 (void **)&out), XPJ_OK);
  /* out[i0, i1] with shape (8, 12): dimension 0 is the first index */
  xpj_array ao = xpj_array_2d(out, XPJ_I64, 8, 12);
  xpj_arg ga = xpj_arg_array(&ao);
  xpj_range r2 = xpj_range_2d(8, 12, 4, 4);
  assert_int_equal(xpj_launch(q, g, &r2, 1, &ga, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  for (int i0 = 0; i0 < 8; i0++)
    for (int i1 = 0; i1 < 12; i1++) {
      /* linear ids are row-major: dimension 1 fastest */
      int64_t lid = (i0 % 4) * 4 + i1 % 4, grp = (i0 / 4) * 3 + i1 / 4;
      if (out[i0 * 12 + i1] != grp * 1000 + lid)
        fail_msg("out[%d,%d] = %lld, want %lld", i0, i1,
                 (long long)out[i0 * 12 + i1], (long long)(grp * 1000 + lid));
    }
  /* the runtime's choice for 8 x 8 is one group of 64 (the kernel's local
   * array holds 64: a bigger group would overrun it, the kernel's
   * contract) */
  uint64_t g8[2] = {8, 8};
  assert_int_equal(xpj_kernel_suggest_local(g, 2, g8, lo), XPJ_OK);
  assert_int_equal(lo[0] * lo[1], 64);
  xpj_array a8 = xpj_array_2d(out, XPJ_I64, 8, 8);
  ga = xpj_arg_array(&a8);
  xpj_range r3 = xpj_range_2d(8, 8, 0, 0);
  assert_int_equal(xpj_launch(q, g, &r3, 1, &ga, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  for (int i = 0; i < 64; i++)
    assert_int_equal(out[i], i); /* row-major: out[i0, i1] = i0 * 8 + i1 */

  /* more local memory than the device has */
  xpj_kernel *h = NULL;
  assert_int_equal(xpj_program_get_kernel(p, "huge", NULL, 0, cpu, NULL, &h),
                   XPJ_ERR_UNSUPPORTED);
  assert_msg_has("bytes of local memory");
  assert_null(h);

  xpj_mem_free(cpu, x);
  xpj_mem_free(cpu, out);
  xpj_queue_destroy(q);
  xpj_program_destroy(p);
}

/* ---- threads ------------------------------------------------------------ */

typedef struct thread_arg {
  xpj_program *p;
  xpj_queue *q;
  xpj_kernel *k;
  int32_t *x;
  int id;
} thread_arg;

static void *get_and_launch(void *arg) {
  thread_arg *t = arg;
  if (xpj_program_get_kernel(t->p, "inc", NULL, 0, cpu, NULL, &t->k) != XPJ_OK)
    return (void *)1;
  xpj_array a = xpj_array_1d(t->x, XPJ_I32, 1000);
  xpj_arg args[] = {xpj_arg_array(&a), xpj_arg_i32(t->id)};
  xpj_range r = xpj_range_1d(1000, 0);
  for (int i = 0; i < 50; i++)
    if (xpj_launch(t->q, t->k, &r, 2, args, NULL) != XPJ_OK)
      return (void *)2;
  return NULL;
}

static int hold(void *u) { /* a host task that takes a moment */
  (void)u;
  struct timespec t = {0, 20 * 1000 * 1000};
  nanosleep(&t, NULL);
  return 0;
}

/* xpj_device_native: the CPU device has no driver handles */
static void test_native_cpu(void **state) {
  (void)state;
  void *h = (void *)1;
  assert_int_equal(xpj_device_native(cpu, XPJ_NATIVE_DEVICE, &h),
                   XPJ_ERR_UNSUPPORTED);
  assert_null(h);
  assert_msg_has("cpu:0");
  assert_int_equal(xpj_device_native(NULL, XPJ_NATIVE_DEVICE, &h),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_device_native(cpu, (xpj_native_kind)-1, &h),
                   XPJ_ERR_INVALID);
}

/* Memory someone else allocated, registered (xpj_mem_import): launches
 * check views against it as against xpjit's own; xpj_mem_free lets it go
 * without freeing it; overlaps and bad arguments are refused. */
static void test_mem_import(void **state) {
  (void)state;
  float *own = malloc(64 * sizeof *own);
  assert_non_null(own);
  for (int i = 0; i < 64; i++)
    own[i] = (float)i;
  assert_int_equal(xpj_mem_import(NULL, own, 256, XPJ_MEM_HOST),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_mem_import(cpu, NULL, 256, XPJ_MEM_HOST),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_mem_import(cpu, own, 0, XPJ_MEM_HOST), XPJ_ERR_INVALID);
  assert_msg_has("size is 0");
  assert_int_equal(xpj_mem_import(cpu, own, 256, (xpj_mem_kind)9),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_mem_import(cpu, (void *)(UINTPTR_MAX - 15), 32,
                                  XPJ_MEM_DEVICE),
                   XPJ_ERR_INVALID);
  assert_msg_has("end of the address space");
  assert_int_equal(xpj_mem_import(cpu, own, 256, XPJ_MEM_HOST), XPJ_OK);
  void *base;
  size_t bytes;
  xpj_mem_kind kind;
  assert_int_equal(xpj_mem_query(cpu, own + 10, &base, &bytes, &kind), XPJ_OK);
  assert_ptr_equal(base, own);
  assert_int_equal(bytes, 256);
  assert_int_equal(kind, XPJ_MEM_HOST);
  /* overlaps: the same range, one inside, one across its start or end */
  assert_int_equal(xpj_mem_import(cpu, own, 256, XPJ_MEM_HOST),
                   XPJ_ERR_INVALID);
  assert_msg_has("overlap");
  assert_msg_has("(imported");
  assert_int_equal(xpj_mem_import(cpu, own + 63, 4, XPJ_MEM_HOST),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_mem_import(cpu, (char *)own - 1, 2, XPJ_MEM_HOST),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_mem_import(cpu, (char *)own + 256, 4, XPJ_MEM_HOST),
                   XPJ_OK); /* adjacent: fine */
  assert_int_equal(xpj_mem_free(cpu, (char *)own + 256), XPJ_OK);
  void *mine;
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_DEVICE, 128, 0, &mine), XPJ_OK);
  assert_int_equal(xpj_mem_import(cpu, (char *)mine + 64, 256, XPJ_MEM_DEVICE),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_mem_free(cpu, mine), XPJ_OK);

  /* a launch takes a view inside the import and refuses one past it */
  xpj_program *p;
  assert_int_equal(xpj_program_create(ctx, "t.xpk", src, strlen(src), NULL, &p),
                   XPJ_OK);
  xpj_kernel *k;
  assert_int_equal(xpj_program_get_kernel(p, "scale", "T=f32", 1, cpu, NULL, &k),
                   XPJ_OK);
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(cpu, NULL, &q), XPJ_OK);
  int64_t n = 64, stride = 1;
  xpj_array in = xpj_array_view(own, XPJ_F32, 1, &n, &stride, 0);
  xpj_arg args[3] = {xpj_arg_f32(2.0f), xpj_arg_array(&in), xpj_arg_bool(1)};
  xpj_range r = xpj_range_1d(64, 0);
  assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  assert_true(own[5] == 20.0f && own[63] == 252.0f);
  xpj_array past = xpj_array_view(own, XPJ_F32, 1, &n, &stride, 1);
  args[1] = xpj_arg_array(&past);
  assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_ERR_INVALID);
  assert_msg_has("256-byte allocation");

  /* let go while a command holds it: still not freed, and then gone */
  args[1] = xpj_arg_array(&in);
  xpj_event *gate;
  assert_int_equal(xpj_enqueue_host_task(q, hold, NULL, &gate), XPJ_OK);
  assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_OK);
  assert_int_equal(xpj_mem_free(cpu, own), XPJ_OK);
  assert_int_equal(xpj_mem_import(cpu, own, 16, XPJ_MEM_HOST),
                   XPJ_ERR_INVALID); /* still used by the queued launch */
  /* it says why: freed already, waiting for its commands (it had told the
   * caller to xpj_mem_free it, as one whose owner freed it) */
  assert_msg_has("waits for the commands that use it");
  assert_null(strstr(xpj_last_error(), "must be let go"));
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  xpj_event_release(gate);
  assert_true(own[5] == 80.0f); /* ran on the memory it was given */
  assert_int_equal(xpj_mem_query(cpu, own, NULL, NULL, NULL),
                   XPJ_ERR_NOT_FOUND);
  /* once xpj_queue_wait returns, no command holds the import: let go, it
   * may be imported again at once (the queue's thread let go of the
   * command's holds after telling the waiter it was done: a new import
   * then overlapped the retired one now and then; XPJIT_QUEUE_HELP=0,
   * make test's test_runtime@queue-thread, shows it) */
  for (int i = 0; i < 2000; i++) {
    assert_int_equal(xpj_mem_import(cpu, own, 256, XPJ_MEM_HOST), XPJ_OK);
    assert_int_equal(xpj_launch(q, k, &r, 3, args, NULL), XPJ_OK);
    assert_int_equal(xpj_queue_wait(q), XPJ_OK);
    assert_int_equal(xpj_mem_free(cpu, own), XPJ_OK);
  }
  own[0] = 1.0f; /* still ours: never freed by xpjit (ASan would see it) */
  free(own);
  xpj_queue_destroy(q);
  xpj_program_destroy(p);
}

/* The snprintf-like calls given buf NULL with a size: the length, nothing
 * written (xpj_versions_str passed NULL with size 64 to snprintf, and
 * crashed in it; an FFI binding that sizes with (NULL, 0) and then passes
 * a wrong size died in the library). */
static void test_null_buffers(void **state) {
  (void)state;
  char buf[512];
  size_t n = xpj_versions_str(buf, sizeof buf);
  assert_true(n > 0 && n == strlen(buf));
  assert_int_equal(xpj_versions_str(NULL, 64), n);
  assert_int_equal(xpj_versions_str(NULL, 0), n);
  n = xpj_cache_default_path(buf, sizeof buf);
  assert_int_equal(xpj_cache_default_path(NULL, sizeof buf), n);
  xpj_target t;
  assert_int_equal(xpj_target_parse("ptx:sm_90", &t, NULL, 0), XPJ_OK);
  n = xpj_target_str(&t, buf, sizeof buf);
  assert_int_equal(xpj_target_str(&t, NULL, sizeof buf), n);
  assert_int_equal(xpj_target_str(NULL, NULL, sizeof buf), 1); /* "?" */
  n = xpj_compile_opts_str(NULL, buf, sizeof buf);
  assert_int_equal(xpj_compile_opts_str(NULL, NULL, sizeof buf), n);
  assert_int_equal(xpj_const_str(XPJ_I64, -3, NULL, sizeof buf), 2);
  xpj_coll_desc cd;
  assert_true(xpj_coll_lookup("group_reduce_add", &cd));
  assert_int_equal(xpj_coll_name(&cd, NULL, sizeof buf),
                   strlen("group_reduce_add"));
  xpj_module *m = NULL;
  assert_int_equal(xpj_module_create(&m), XPJ_OK);
  xpj_type f32 = xpj_type_scalar(m, XPJ_F32);
  assert_int_equal(xpj_type_str(m, f32, NULL, sizeof buf), 3);
  xpj_module_destroy(m);
  xpj_cache_config cfg = {.mode = XPJ_CACHE_MODE_OFF};
  xpj_cache *c = NULL;
  assert_int_equal(xpj_cache_open(&cfg, &c), XPJ_OK);
  assert_int_equal(xpj_cache_problem(c, NULL, sizeof buf), 0);
  xpj_cache_close(c);
}

/* The exported constructors and the structure sizes a binding checks. */
static void test_helpers(void **state) {
  (void)state;
  int64_t shape[3] = {2, 3, 4}, strides[3] = {-12, 4, 1};
  float buf[24];
  xpj_array a = xpj_array_view(buf, XPJ_F32, 3, shape, strides, 12);
  assert_int_equal(a.ndim, 3);
  assert_int_equal(a.offset, 12);
  assert_int_equal(a.strides[0], -12);
  assert_int_equal(a.shape[2], 4);
  a = xpj_array_view(buf, XPJ_F32, 3, shape, NULL, 0);
  assert_int_equal(a.strides[0], 12);
  assert_int_equal(a.strides[1], 4);
  assert_int_equal(a.strides[2], 1);
  a = xpj_array_view(buf, XPJ_F32, XPJ_MAX_RANK + 1, shape, NULL, 0);
  assert_int_equal(a.ndim, 0);
  a = xpj_array_2d(buf, XPJ_I32, 4, 6);
  assert_int_equal(a.strides[0], 6);
  assert_int_equal(a.dtype, XPJ_I32);

  int8_t i8 = -5;
  uint16_t u16 = 65535, h = xpj_f16_from_double(1.5);
  int64_t i64 = INT64_MIN;
  uint64_t u64 = UINT64_MAX;
  float f = 0.25f;
  double d = -3.5;
  uint8_t t = 7;
  xpj_arg g = xpj_arg_scalar(XPJ_I8, &i8);
  assert_int_equal(g.kind, XPJ_ARG_SCALAR);
  assert_int_equal(g.dtype, XPJ_I8);
  assert_int_equal(g.v.i, -5);
  assert_int_equal(xpj_arg_scalar(XPJ_U16, &u16).v.u, 65535);
  assert_true(xpj_arg_scalar(XPJ_I64, &i64).v.i == INT64_MIN);
  assert_true(xpj_arg_scalar(XPJ_U64, &u64).v.u == UINT64_MAX);
  assert_true(xpj_arg_scalar(XPJ_F32, &f).v.f == 0.25);
  assert_true(xpj_arg_scalar(XPJ_F64, &d).v.f == -3.5);
  assert_true(xpj_arg_scalar(XPJ_F16, &h).v.f == 1.5);
  assert_int_equal(xpj_arg_scalar(XPJ_BOOL, &t).v.i, 1);
  assert_int_equal(xpj_arg_scalar(XPJ_VOID, &t).dtype, XPJ_VOID);
  assert_int_equal(xpj_arg_scalar((xpj_scalar)99, &t).dtype, XPJ_VOID);
  assert_int_equal(xpj_arg_scalar(XPJ_I32, NULL).dtype, XPJ_VOID);
  assert_int_equal(xpj_arg_local(32).kind, XPJ_ARG_LOCAL);
  assert_int_equal(xpj_arg_local(32).v.u, 32);

  xpj_range r = xpj_range_2d(8, 16, 0, 0);
  assert_int_equal(r.ndim, 2);
  assert_int_equal(r.global[1], 16);
  assert_int_equal(r.local[2], 0);
  r = xpj_range_1d(8, 4);
  assert_int_equal(r.local[1], 1);

  assert_int_equal(xpj_struct_size("xpj_array"), sizeof(xpj_array));
  assert_int_equal(xpj_struct_size("xpj_arg"), sizeof(xpj_arg));
  assert_int_equal(xpj_struct_size("xpj_device_info"), sizeof(xpj_device_info));
  assert_int_equal(xpj_struct_size("xpj_cache_stats"), sizeof(xpj_cache_stats));
  assert_int_equal(xpj_struct_size("xpj_nothing"), 0);
  assert_int_equal(xpj_struct_size(NULL), 0);

  /* which type parameter a parameter's type is, or its elements are */
  xpj_program *p;
  assert_int_equal(xpj_program_create(ctx, "t.xpk", src, strlen(src), NULL, &p),
                   XPJ_OK);
  const xpj_module *m = xpj_program_module(p);
  xpj_func *fn = xpj_module_find(m, "scale");
  assert_non_null(fn);
  assert_int_equal(xpj_type_param_index(m, xpj_func_param_type(fn, 0)), 0);
  assert_int_equal(xpj_type_param_index(m, xpj_func_param_type(fn, 1)), 0);
  assert_int_equal(xpj_type_param_index(m, xpj_func_param_type(fn, 2)), -1);
  assert_int_equal(xpj_type_param_index(m, 0xfffffff), -1);
  assert_int_equal(xpj_type_param_index(NULL, 1), -1);
  xpj_program_destroy(p);
}

static void test_threads(void **state) {
  (void)state;
  const char *s =
      "kernel inc(x: global i32[], v: i32) range {\n"
      "  atomic_add(&x[global_id(0)], v);\n"
      "}\n";
  xpj_program *p;
  assert_int_equal(xpj_program_create(ctx, "inc.xpk", s, strlen(s), NULL, &p),
                   XPJ_OK);
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(cpu, NULL, &q), XPJ_OK);
  int32_t *x;
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_SHARED, 1000 * sizeof *x, 0,
                                 (void **)&x), XPJ_OK);
  memset(x, 0, 1000 * sizeof *x);
#if defined(__SANITIZE_ADDRESS__)
  /* GCC 12's libasan takes no lock around fork(): a compile worker forked
   * while another thread allocates can inherit a held allocator lock
   * (test_codegen.c, test_threads). Under ASan the kernel is compiled
   * first, so the threads race on the lookup and the launches only. */
  xpj_kernel *pre;
  if (xpj_program_get_kernel(p, "inc", NULL, 0, cpu, NULL, &pre) != XPJ_OK)
    fail_msg("inc: %s", xpj_last_error());
#endif
  enum { T = 4 };
  pthread_t th[T];
  thread_arg ta[T];
  for (int i = 0; i < T; i++) {
    ta[i] = (thread_arg){p, q, NULL, x, i + 1};
    assert_int_equal(pthread_create(&th[i], NULL, get_and_launch, &ta[i]), 0);
  }
  for (int i = 0; i < T; i++) {
    void *rc;
    pthread_join(th[i], &rc);
    if (rc)
      fail_msg("thread %d failed (%d): %s", i, (int)(intptr_t)rc,
               xpj_last_error());
  }
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  for (int i = 1; i < T; i++)
    assert_ptr_equal(ta[i].k, ta[0].k); /* one kernel for all threads */
  for (int i = 0; i < 1000; i++)
    assert_int_equal(x[i], 50 * (1 + 2 + 3 + 4));
  xpj_mem_free(cpu, x);
  xpj_queue_destroy(q);
  xpj_program_destroy(p);
}

/* The main thread's stack bound a waiting thread checks before it runs
 * kernels (queue.c): computed without /proc, it is what glibc's
 * pthread_getattr_np reads from there; on another thread, none. */
static void *stack_low_elsewhere(void *arg) {
  *(uintptr_t *)arg = rt_main_stack_low();
  return NULL;
}

static void *fork_and_ask(void *arg) {
  (void)arg;
  pid_t pid = fork();
  if (pid == 0)
    _exit(rt_main_stack_low() == 0 ? 0 : 1);
  int ws = 0;
  bool ok = pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) &&
            WEXITSTATUS(ws) == 0;
  return ok ? (void *)1 : NULL;
}

/* Misuse an adversarial review found (helper-49): each was a crash,
 * a hang, memory written that is not the caller's, or a wrong status. */
static xpj_queue *self_q;
static xpj_event *self_ev;
static int wait_self(void *u) {
  (void)u;
  int bad = 0;
  bad |= xpj_queue_wait(self_q) != XPJ_ERR_INVALID; /* it hung */
  bad |= !strstr(xpj_last_error(), "same queue") << 1;
  bad |= (xpj_event_wait(self_ev) != XPJ_ERR_INVALID) << 2;
  xpj_queue_destroy(self_q); /* refused (a warning), not a hang */
  return bad;
}

/* The warnings test_misuse expects (an error line, shown only with XPJIT_LOG
 * set, was all that xpj_queue_destroy from its own queue's command said) */
static char misuse_warning[512];
static int misuse_warnings;
static void on_misuse_warning(void *ud, const char *msg) {
  (void)ud;
  misuse_warnings++;
  snprintf(misuse_warning, sizeof misuse_warning, "%s", msg);
}

static void test_misuse(void **state) {
  (void)state;
  xpj_program *p = NULL;
  /* (size_t)-1 as "NUL-terminated": malloc(len + 1) wrapped to 0, and
   * the copy wrote past it */
  assert_int_equal(xpj_program_create(ctx, "t", src, SIZE_MAX, NULL, &p),
                   XPJ_ERR_SYNTAX);
  assert_msg_has("too large");
  assert_null(p);

  /* host memory that runs into an allocation: was taken as host memory
   * and the allocator's header overwritten */
  xpj_queue *q;
  assert_int_equal(xpj_queue_create(cpu, NULL, &q), XPJ_OK);
  uint8_t *host = malloc(64), *a = NULL;
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_SHARED, 64, 0, (void **)&a),
                   XPJ_OK);
  uint8_t pat = 0xab;
  assert_int_equal(xpj_enqueue_fill(q, a - 8, &pat, 1, 16, NULL),
                   XPJ_ERR_INVALID);
  assert_msg_has("run into memory allocated on cpu:0");
  assert_int_equal(xpj_enqueue_copy(q, a - 8, host, 16, NULL),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_enqueue_copy(q, host, a - 8, 16, NULL),
                   XPJ_ERR_INVALID);
  assert_int_equal(xpj_enqueue_copy(q, a, host, 64, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);

  /* a command that waits for its own queue, or its own event: refused
   * (it waited for itself, for ever), and destroying it from inside */
  self_q = q;
  misuse_warnings = 0;
  xpj_set_warning_handler(on_misuse_warning, NULL);
  assert_int_equal(xpj_enqueue_host_task(q, wait_self, NULL, &self_ev),
                   XPJ_OK);
  assert_int_equal(xpj_event_wait(self_ev), XPJ_OK);
  xpj_event_release(self_ev);
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  xpj_set_warning_handler(NULL, NULL);
  assert_int_equal(misuse_warnings, 1); /* the destroy, refused */
  assert_non_null(strstr(misuse_warning, "xpj_queue_destroy"));
  assert_non_null(strstr(misuse_warning, "same queue"));

  /* a launch timeout of UINT64_MAX ms is no deadline (the deadline
   * overflowed into the past: every launch was cancelled) */
  xpj_queue_desc qd = {.launch_timeout_ms = UINT64_MAX};
  xpj_queue *tq;
  assert_int_equal(xpj_queue_create(cpu, &qd, &tq), XPJ_OK);
  assert_int_equal(xpj_program_create(ctx, "t", src, strlen(src), NULL, &p),
                   XPJ_OK);
  xpj_kernel *k, *g;
  assert_int_equal(xpj_program_get_kernel(p, "scale", "T=f32", 1, cpu, NULL,
                                          &k), XPJ_OK);
  enum { N = 1 << 16 };
  float *x;
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_SHARED, N * 4, 0, (void **)&x),
                   XPJ_OK);
  for (int i = 0; i < N; i++)
    x[i] = 1;
  xpj_array v = xpj_array_1d(x, XPJ_F32, N);
  xpj_arg args[] = {xpj_arg_f32(3), xpj_arg_array(&v), xpj_arg_bool(1)};
  xpj_range r = xpj_range_1d(N, 0);
  assert_int_equal(xpj_launch(tq, k, &r, 3, args, NULL), XPJ_OK);
  assert_int_equal(xpj_queue_wait(tq), XPJ_OK);
  for (int i = 0; i < N; i++)
    if (x[i] != 6)
      fail_msg("element %d is %g", i, x[i]);

  /* argument numbers and geometry checked as a launch checks them */
  xpj_kernel_arg_info ai;
  assert_int_equal(xpj_kernel_get_arg_info(k, UINT_MAX, &ai), XPJ_ERR_INVALID);
  assert_msg_has("no argument 4294967295");
  assert_int_equal(xpj_program_get_kernel(p, "grid", NULL, 0, cpu, NULL, &g),
                   XPJ_OK);
  uint64_t gl[3] = {8, 8, 8}, lo[3], zero[2] = {0, 8};
  assert_int_equal(xpj_kernel_suggest_local(g, 1, gl, lo), XPJ_ERR_INVALID);
  assert_int_equal(xpj_kernel_suggest_local(g, 3, gl, lo), XPJ_ERR_INVALID);
  assert_int_equal(xpj_kernel_suggest_local(g, 2, zero, lo), XPJ_ERR_INVALID);
  assert_int_equal(xpj_kernel_suggest_local(g, 2, gl, lo), XPJ_OK);

  /* another context: its cache mode checked, its events and kernels
   * refused with a message that says so */
  xpj_context_desc bad = {.cache_mode = (xpj_cache_mode)77};
  xpj_context *c2 = NULL;
  assert_int_equal(xpj_context_create(&bad, &c2), XPJ_ERR_INVALID);
  assert_msg_has("cache_mode 77");
  setenv("XPJIT_DEVICE", "cpu", 1);
  assert_int_equal(xpj_context_create(NULL, &c2), XPJ_OK);
  unsetenv("XPJIT_DEVICE");
  xpj_device *cpu2;
  xpj_queue *q2;
  assert_int_equal(xpj_device_select(c2, "cpu", &cpu2), XPJ_OK);
  assert_int_equal(xpj_queue_create(cpu2, NULL, &q2), XPJ_OK);
  assert_int_equal(xpj_launch(q2, k, &r, 3, args, NULL), XPJ_ERR_INVALID);
  assert_msg_has("another context");
  xpj_event *e;
  assert_int_equal(xpj_enqueue_host_task(q, record, NULL, &e), XPJ_OK);
  assert_int_equal(xpj_enqueue_wait_events(q2, 1, &e, NULL), XPJ_ERR_INVALID);
  assert_msg_has("another context");
  assert_int_equal(xpj_queue_wait(q), XPJ_OK);
  xpj_event_release(e);
  xpj_queue_destroy(q2);
  xpj_context_destroy(c2);

  xpj_mem_free(cpu, x);
  xpj_mem_free(cpu, a);
  free(host);
  xpj_program_destroy(p);
  xpj_queue_destroy(tq);
  xpj_queue_destroy(q);
}

static void test_main_stack_low(void **state) {
  (void)state;
  struct rlimit rl;
  assert_int_equal(getrlimit(RLIMIT_STACK, &rl), 0);
  if (rl.rlim_cur == RLIM_INFINITY) {
    assert_true(rt_main_stack_low() == 0);
    return;
  }
  pthread_attr_t a;
  void *base = NULL;
  size_t size = 0;
  assert_int_equal(pthread_getattr_np(pthread_self(), &a), 0);
  assert_int_equal(pthread_attr_getstack(&a, &base, &size), 0);
  pthread_attr_destroy(&a);
  assert_true(rt_main_stack_low() == (uintptr_t)base);
  uintptr_t other = 1;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, stack_low_elsewhere, &other), 0);
  pthread_join(t, NULL);
  assert_true(other == 0);
  /* a limit raised since the start moves nothing that lies below */
  uintptr_t before = rt_main_stack_low();
  if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > rl.rlim_cur * 2) {
    struct rlimit raised = {rl.rlim_cur * 2, rl.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_STACK, &raised), 0);
    assert_true(rt_main_stack_low() == before);
    assert_int_equal(setrlimit(RLIMIT_STACK, &rl), 0);
  }
  /* a process forked from another thread runs on that thread's stack:
   * no answer from the main thread's place */
  assert_int_equal(pthread_create(&t, NULL, fork_and_ask, NULL), 0);
  void *ok = NULL;
  pthread_join(t, &ok);
  assert_true(ok == (void *)1);
}

/* A local array parameter's bytes reach the driver whole: a SPIR-V
 * launch hands clSetKernelArg / zeKernelSetArgumentValue the size in 64
 * bits (cut to 32 bits, 4 GiB + 64 bytes became 64 and 4 GiB none at all
 * while the kernel was told it had 2^30 elements: an OpenCL driver that
 * reports 4 GiB or more of local memory). White-box: the CPU device
 * plays a SPIR-V device with 8 GiB. */
static void test_local_arg_bytes(void **state) {
  (void)state;
  static const char lsrc[] =
      "kernel k(out: global f32[], a: local f32[]) ndrange(1) {\n"
      "  a[local_id(0)] = 1.0; barrier(); out[global_id(0)] = a[size(a) - 1];\n"
      "}\n";
  xpj_program *p;
  xpj_kernel *k;
  assert_int_equal(xpj_program_create(ctx, "l.xpk", lsrc, strlen(lsrc), NULL, &p),
                   XPJ_OK);
  assert_int_equal(xpj_program_get_kernel(p, "k", NULL, 0, cpu, NULL, &k),
                   XPJ_OK);
  float *o;
  assert_int_equal(xpj_mem_alloc(cpu, XPJ_MEM_DEVICE, 256, 0, (void **)&o),
                   XPJ_OK);
  xpj_array vo = xpj_array_1d(o, XPJ_F32, 64);
  xpj_device_info save = cpu->info;
  xpj_target_kind kind = cpu->target.kind;
  cpu->info.local_mem_size = 8ull << 30;
  cpu->target.kind = XPJ_TARGET_SPIRV;
  static const uint64_t counts[] = {(1ull << 30) + 16, 1ull << 30, 16};
  for (int i = 0; i < 3; i++) {
    xpj_arg args[] = {xpj_arg_array(&vo), xpj_arg_local(counts[i])};
    xpj_range r = xpj_range_1d(64, 64);
    rt_launch *l = NULL;
    assert_int_equal(rt_launch_prepare(k, &r, 2, args, &l), XPJ_OK);
    unsigned a = l->nabi - 2; /* the local array's bytes, then its count */
    assert_null(l->args[a]);
    assert_true(l->abi[a].local == counts[i] * 4);
    assert_true(*(const uint64_t *)l->args[a + 1] == counts[i]);
    rt_launch_free(l);
  }
  cpu->info = save;
  cpu->target.kind = kind;
  xpj_mem_free(cpu, o);
  xpj_program_destroy(p);
}

int main(void) {
  test_owner_init();
  /* the CPU device alone, whatever drivers this machine has: the filter
   * tests count devices (test_opencl, test_cuda and test_ze cover the
   * others) */
  setenv("XPJIT_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  setenv("XPJIT_ZE_LIBRARY", "/nonexistent/libze_loader.so.1", 1);
  setenv("XPJIT_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1", 1);
  const struct CMUnitTest tests[] = {
      guarded_test(test_main_stack_low),
      guarded_test(test_escaped_child),
      guarded_test(test_filters),     guarded_test(test_visible),
      guarded_test(test_device_info), guarded_test(test_memory),
      guarded_test(test_copy_fill),   guarded_test(test_events),
      guarded_test(test_program),     guarded_test(test_threads),
      guarded_test(test_misuse),
      guarded_test(test_native_cpu),
      guarded_test(test_mem_import),  guarded_test(test_helpers),
      guarded_test(test_null_buffers),
      guarded_test(test_local_arg_bytes),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
