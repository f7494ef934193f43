// scan_group.cl - OpenCL C twin of scan_group in bench/cpu.xpk (PoCL peer
// of bench/cpu). -DT=float.
#pragma OPENCL FP_CONTRACT OFF
#define SL 256  // largest work-group

// y = the inclusive prefix sums of x within each work-group: Hillis-Steele
// between two buffers in local memory.  Launch: 1-D nd-range of n,
// power-of-two local size <= SL.
__kernel void scan_group(__global const T *x, __global T *y) {
    __local T buf[2][SL];
    long lid = get_local_id(0);
    long gid = get_global_id(0);
    buf[0][lid] = x[gid];
    barrier(CLK_LOCAL_MEM_FENCE);
    int src = 0;
    for (long off = 1; off < (long)get_local_size(0); off *= 2) {
        T s = buf[src][lid];
        if (lid >= off) {
            s += buf[src][lid - off];
        }
        buf[1 - src][lid] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        src = 1 - src;
    }
    y[gid] = buf[src][lid];
}
