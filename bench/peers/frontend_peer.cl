// The same three kernels in OpenCL C 2.0, the peer's language.
#define TILE 16

kernel void axpy(float a, global const float *x, global float *y, long n) {
    long i = get_global_id(0);
    if (i < n) y[i] = a * x[i] + y[i];
}

kernel void block_sum(global const float *x, global atomic_float *total, long n) {
    local float tile[256];
    long lid = get_local_id(0);
    float acc = 0.0f;
    for (long i = get_global_id(0); i < n; i += get_global_size(0))
        acc += x[i];
    tile[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s) tile[lid] += tile[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        float old = atomic_load_explicit(total, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(total, &old, old + tile[0],
                   memory_order_relaxed, memory_order_relaxed)) {}
    }
}

kernel void matmul_tiled(global const float *a, global const float *b, global float *c,
                         long m, long n, long kdim) {
    local float ta[TILE][TILE];
    local float tb[TILE][TILE];
    long ty = get_local_id(0), tx = get_local_id(1);
    long row = get_global_id(0), col = get_global_id(1);
    float acc = 0.0f;
    long ntiles = (kdim + TILE - 1) / TILE;
    for (long t = 0; t < ntiles; t++) {
        long ka = t * TILE + tx, kb = t * TILE + ty;
        ta[ty][tx] = (row < m && ka < kdim) ? a[row * kdim + ka] : 0.0f;
        tb[ty][tx] = (kb < kdim && col < n) ? b[kb * n + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (long k = 0; k < TILE; k++) acc += ta[ty][k] * tb[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < m && col < n) c[row * n + col] = acc;
}
