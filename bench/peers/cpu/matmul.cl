// matmul.cl - OpenCL C twin of matmul in bench/cpu.xpk (PoCL peer of
// bench/cpu). -DT=float.  Row-major a (m x kdim), b (kdim x n), c (m x n).
#pragma OPENCL FP_CONTRACT OFF
#define RV 16
#define BM 64
#define BN 64
#define BK 64

// Register-blocked through local-memory tiles: a work-group computes a
// BM x BN block of c; per step along K it copies a BM x BK tile of a and a
// BK x BN tile of b into local memory (in lanes of RV contiguous elements),
// then each work-item multiplies 4 rows by RV consecutive columns, kept in
// one private array of 4 * RV accumulators.  Launch: 2-D nd-range, local
// (BN / RV, BM / 4) = (4, 16), global (n / RV, m / 4); m, n and kdim
// multiples of 64.
__kernel void matmul(__global const T *a, __global const T *b, __global T *c,
                     long m, long n, long kdim) {
    __local T ta[BM][BK];
    __local T tb[BK][BN];
    long row0 = (long)get_group_id(1) * BM;
    long col0 = (long)get_group_id(0) * BN;
    long wg = (long)get_local_size(0) * (long)get_local_size(1);
    long lin = (long)get_local_id(1) * (long)get_local_size(0) + (long)get_local_id(0);
    T acc[4 * RV];
    for (int v = 0; v < 4 * RV; v++) {
        acc[v] = (T)0;
    }
    for (long t = 0; t < kdim; t += BK) {
        for (long e = lin; e < BM * BK / RV; e += wg) {
            long r = e / (BK / RV);
            long k0 = e % (BK / RV) * RV;
            for (int v = 0; v < RV; v++) {
                ta[r][k0 + v] = a[(row0 + r) * kdim + t + k0 + v];
            }
        }
        for (long e = lin; e < BK * BN / RV; e += wg) {
            long r = e / (BN / RV);
            long j0 = e % (BN / RV) * RV;
            for (int v = 0; v < RV; v++) {
                tb[r][j0 + v] = b[(t + r) * n + col0 + j0 + v];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        long r0 = 4 * (long)get_local_id(1);
        long j0 = (long)get_local_id(0) * RV;
        for (long k = 0; k < BK; k++) {
            T a0 = ta[r0][k];
            T a1 = ta[r0 + 1][k];
            T a2 = ta[r0 + 2][k];
            T a3 = ta[r0 + 3][k];
            for (int v = 0; v < RV; v++) {
                T bv = tb[k][j0 + v];
                acc[v] += a0 * bv;
                acc[RV + v] += a1 * bv;
                acc[2 * RV + v] += a2 * bv;
                acc[3 * RV + v] += a3 * bv;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    long r0 = row0 + 4 * (long)get_local_id(1);
    long j0 = col0 + (long)get_local_id(0) * RV;
    for (int v = 0; v < RV; v++) {
        c[r0 * n + j0 + v] = acc[v];
        c[(r0 + 1) * n + j0 + v] = acc[RV + v];
        c[(r0 + 2) * n + j0 + v] = acc[2 * RV + v];
        c[(r0 + 3) * n + j0 + v] = acc[3 * RV + v];
    }
}
