// matmul_naive.cl - OpenCL C twin of matmul_naive in bench/cpu.xpk (PoCL
// peer of bench/cpu). -DT=float.  Row-major a (m x kdim), b (kdim x n),
// c (m x n).
#pragma OPENCL FP_CONTRACT OFF

// One element of c per work-item, the k loop inside it.  Launch: 2-D range
// (n, m); dimension 0 is the column.
__kernel void matmul_naive(__global const T *a, __global const T *b, __global T *c,
                           long m, long n, long kdim) {
    long col = get_global_id(0);
    long row = get_global_id(1);
    T acc = (T)0;
    for (long k = 0; k < kdim; k++) {
        acc += a[row * kdim + k] * b[k * n + col];
    }
    c[row * n + col] = acc;
}
