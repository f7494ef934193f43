/* ranks.c - an MPI job whose ranks all need the same kernels: each rank
 * gets 20 specialisations of examples/axpy.xpk (axpy and axpby, five
 * element types, ranks 1 and 2), runs each on its own data and checks it,
 * and rank 0 reports where the kernels came from, summed over ranks: a
 * compile, this node's cache, the Redis tier, the daemon. With the Redis
 * tier (XPJIT_REDIS) every kernel is compiled once in the whole job; with
 * one cache per rank and no tier, once per rank. docs/cluster.md.
 *
 *   make mpi-example
 *   mpirun -n 8 build/examples/mpi/ranks          (run from the repository root)
 *   XPJIT_RANK_CACHE=1: each rank its own cache directory under
 *   $TMPDIR/xpjit-ranks/RANK, as if each rank were on its own node
 */
#include <mpi.h>
#include <xpjit.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define N 4096

static const struct {
  const char *name;
  xpj_scalar t;
  size_t size;
} types[] = {{"f32", XPJ_F32, 4}, {"f64", XPJ_F64, 8}, {"i32", XPJ_I32, 4},
             {"i64", XPJ_I64, 8}, {"u32", XPJ_U32, 4}};

static void set(void *p, xpj_scalar t, size_t i, long v) {
  switch (t) {
  case XPJ_F32: ((float *)p)[i] = (float)v; break;
  case XPJ_F64: ((double *)p)[i] = (double)v; break;
  case XPJ_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  case XPJ_I64: ((int64_t *)p)[i] = (int64_t)v; break;
  default: ((uint32_t *)p)[i] = (uint32_t)v; break;
  }
}

static long get(const void *p, xpj_scalar t, size_t i) {
  switch (t) {
  case XPJ_F32: return (long)((const float *)p)[i];
  case XPJ_F64: return (long)((const double *)p)[i];
  case XPJ_I32: return ((const int32_t *)p)[i];
  case XPJ_I64: return (long)((const int64_t *)p)[i];
  default: return (long)((const uint32_t *)p)[i];
  }
}

static xpj_arg scalar(xpj_scalar t, long v) {
  xpj_arg a = {XPJ_ARG_SCALAR, t, {0}, NULL};
  if (t == XPJ_F32 || t == XPJ_F64)
    a.v.f = (double)v;
  else if (t == XPJ_U32)
    a.v.u = (uint64_t)v;
  else
    a.v.i = v;
  return a;
}

/* Runs one specialisation; returns the number of wrong elements. */
static long run_one(xpj_device *dev, xpj_queue *q, xpj_kernel *k, bool axpby,
                    xpj_scalar t, size_t es, unsigned ndim, int rank) {
  void *x, *y;
  if (xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * es, 0, &x) != XPJ_OK ||
      xpj_mem_alloc(dev, XPJ_MEM_SHARED, N * es, 0, &y) != XPJ_OK)
    return N;
  for (size_t i = 0; i < N; i++) {
    set(x, t, i, (long)(i % 100));
    set(y, t, i, (long)((i + (size_t)rank) % 7));
  }
  xpj_array ax = ndim == 1 ? xpj_array_1d(x, t, N) : xpj_array_2d(x, t, 64, 64);
  xpj_array ay = ndim == 1 ? xpj_array_1d(y, t, N) : xpj_array_2d(y, t, 64, 64);
  xpj_arg a3[] = {scalar(t, 3), xpj_arg_array(&ax), xpj_arg_array(&ay)};
  xpj_arg a4[] = {scalar(t, 3), xpj_arg_array(&ax), scalar(t, 2),
                  xpj_arg_array(&ay)};
  xpj_range r = xpj_range_1d(N, 0);
  long bad = N;
  if (xpj_launch(q, k, &r, axpby ? 4 : 3, axpby ? a4 : a3, NULL) == XPJ_OK &&
      xpj_queue_wait(q) == XPJ_OK) {
    bad = 0;
    for (size_t i = 0; i < N; i++) {
      long want = 3 * (long)(i % 100) +
                  (axpby ? 2 : 1) * (long)((i + (size_t)rank) % 7);
      bad += get(y, t, i) != want;
    }
  }
  xpj_mem_free(dev, x);
  xpj_mem_free(dev, y);
  return bad;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char dir[512] = "";
  if (getenv("XPJIT_RANK_CACHE")) {
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/xpjit-ranks", tmp);
    mkdir(dir, 0700);
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%d", rank);
    mkdir(dir, 0700);
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/cache.db");
  }
  xpj_context_desc desc = {0};
  desc.visible = "cpu";
  desc.cpu_threads = 1; /* the ranks share the node's cores */
  desc.cache_path = *dir ? dir : NULL;
  xpj_context *ctx = NULL;
  xpj_device *dev = NULL;
  xpj_queue *q = NULL;
  xpj_program *p = NULL;
  long counts[6] = {0}; /* per xpj_kernel_origin */
  long bad = 0, failed = 0;
  if (xpj_context_create(&desc, &ctx) != XPJ_OK ||
      xpj_device_select(ctx, "cpu", &dev) != XPJ_OK ||
      xpj_queue_create(dev, NULL, &q) != XPJ_OK ||
      xpj_program_create_file(ctx, "examples/axpy.xpk", NULL, &p) != XPJ_OK) {
    fprintf(stderr, "rank %d: %s (run from the repository root)\n", rank,
            xpj_last_error());
    failed = 1;
  }
  double t0 = MPI_Wtime();
  for (int kind = 0; kind < 2 && !failed; kind++)
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
      for (unsigned ndim = 1; ndim <= 2; ndim++) {
        char dt[16];
        snprintf(dt, sizeof dt, "T=%s", types[ti].name);
        xpj_kernel *k;
        if (xpj_program_get_kernel(p, kind ? "axpby" : "axpy", dt, ndim, dev,
                                   NULL, &k) != XPJ_OK) {
          fprintf(stderr, "rank %d: %s\n", rank, xpj_last_error());
          failed++;
          continue;
        }
        xpj_kernel_info info;
        if (xpj_kernel_get_info(k, &info) == XPJ_OK && info.origin < 6)
          counts[info.origin]++;
        bad += run_one(dev, q, k, kind, types[ti].t, types[ti].size, ndim,
                       rank);
      }
  double secs = MPI_Wtime() - t0, slowest = 0;
  long total[6], allbad = 0, allfailed = 0;
  MPI_Reduce(counts, total, 6, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&failed, &allfailed, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&secs, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("ranks: %d, kernels per rank: 20, slowest rank %.0f ms\n", size,
           slowest * 1e3);
    printf("kernels compiled: %ld, from the local cache: %ld, from the Redis "
           "tier: %ld, from the daemon: %ld, from bundles: %ld\n",
           total[XPJ_ORIGIN_COMPILED], total[XPJ_ORIGIN_CACHE],
           total[XPJ_ORIGIN_REDIS], total[XPJ_ORIGIN_DAEMON],
           total[XPJ_ORIGIN_BUNDLE]);
    printf("results: %s\n", allbad || allfailed ? "WRONG" : "correct");
  }
  xpj_program_destroy(p);
  xpj_queue_destroy(q);
  xpj_context_destroy(ctx);
  MPI_Finalize();
  return rank == 0 && (allbad || allfailed) ? 1 : 0;
}
