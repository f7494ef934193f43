// matvec.cl - OpenCL C twin of matvec in bench/cpu.xpk (PoCL peer of
// bench/cpu). -DT=float.  Row-major a (m x kdim).
#pragma OPENCL FP_CONTRACT OFF
#define RV 16   // accumulators per work-item

// y = a x: one row per work-item, its dot product with x summed in RV
// lanes, then the lanes pairwise.  Launch: 1-D range (m).
__kernel void matvec(__global const T *a, __global const T *x, __global T *y, long kdim) {
    long i = get_global_id(0);
    __global const T *row = a + i * kdim;
    T acc[RV];
    for (int v = 0; v < RV; v++) {
        acc[v] = (T)0;
    }
    long k = 0;
    for (; k + RV <= kdim; k += RV) {
        for (int v = 0; v < RV; v++) {
            acc[v] += row[k + v] * x[k + v];
        }
    }
    for (; k < kdim; k++) {
        acc[0] += row[k] * x[k];
    }
    for (int w = RV / 2; w > 0; w /= 2) {
        for (int v = 0; v < w; v++) {
            acc[v] += acc[v + w];
        }
    }
    y[i] = acc[0];
}
