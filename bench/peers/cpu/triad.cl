// triad.cl - OpenCL C twin of triad in bench/cpu.xpk (PoCL peer of
// bench/cpu). -DT=float or -DT=double. No contraction into fma, like
// xpjit's IEEE default and the ISO C OpenMP peer.
#pragma OPENCL FP_CONTRACT OFF
#ifdef USE_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

// a = b + s * c, one work-item per element.  Launch: 1-D range of n.
__kernel void triad(__global T *a, __global const T *b, __global const T *c, T s) {
    size_t i = get_global_id(0);
    a[i] = b[i] + s * c[i];
}
