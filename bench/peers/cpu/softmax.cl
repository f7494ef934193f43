// softmax.cl - OpenCL C twin of softmax in bench/cpu.xpk (PoCL peer of
// bench/cpu). -DT=float.  Row-major x and y (rows x n).
#pragma OPENCL FP_CONTRACT OFF
#define RV 16   // accumulators per work-item

// One row per work-item: its maximum m, then y = exp(x - m) with its sum
// in RV lanes, then y times 1 / sum.  Launch: 1-D range (rows).
__kernel void softmax(__global const T *x, __global T *y, long n) {
    long r = get_global_id(0);
    __global const T *xr = x + r * n;
    __global T *yr = y + r * n;
    T m = xr[0];
    for (long j = 1; j < n; j++) {
        m = max(m, xr[j]);
    }
    T acc[RV];
    for (int v = 0; v < RV; v++) {
        acc[v] = (T)0;
    }
    long j = 0;
    for (; j + RV <= n; j += RV) {
        for (int v = 0; v < RV; v++) {
            T e = exp(xr[j + v] - m);
            yr[j + v] = e;
            acc[v] += e;
        }
    }
    for (; j < n; j++) {
        T e = exp(xr[j] - m);
        yr[j] = e;
        acc[0] += e;
    }
    for (int w = RV / 2; w > 0; w /= 2) {
        for (int v = 0; v < w; v++) {
            acc[v] += acc[v + w];
        }
    }
    T inv = (T)1 / acc[0];
    for (long k = 0; k < n; k++) {
        yr[k] *= inv;
    }
}
