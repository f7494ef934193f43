// matmul_tiled16.cl - OpenCL C twin of matmul_tiled16 in bench/cpu.xpk (PoCL
// peer of bench/cpu). -DT=float.  Row-major a (m x kdim), b (kdim x n),
// c (m x n).
#pragma OPENCL FP_CONTRACT OFF
#define TILE 16

// Launch: 2-D nd-range, local (TILE, TILE), global (n, m) rounded up to
// multiples of TILE.  Dimension 0 is the column.
__kernel __attribute__((reqd_work_group_size(16, 16, 1))) void matmul_tiled16(__global const T *a, __global const T *b, __global T *c,
                           long m, long n, long kdim) {
    __local T ta[TILE][TILE];
    __local T tb[TILE][TILE];
    long tx = get_local_id(0);
    long ty = get_local_id(1);
    long col = get_global_id(0);
    long row = get_global_id(1);
    T acc = (T)0;
    for (long t = 0; t < kdim; t += TILE) {
        ta[ty][tx] = row < m && t + tx < kdim ? a[row * kdim + t + tx] : (T)0;
        tb[ty][tx] = t + ty < kdim && col < n ? b[(t + ty) * n + col] : (T)0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (long k = 0; k < TILE; k++) {
            acc += ta[ty][k] * tb[k][tx];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < m && col < n) {
        c[row * n + col] = acc;
    }
}
