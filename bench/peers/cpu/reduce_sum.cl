// reduce_sum.cl - OpenCL C twin of reduce_sum in bench/cpu.xpk (PoCL peer
// of bench/cpu). -DT=float.
#pragma OPENCL FP_CONTRACT OFF
#define RL 256  // largest work-group
#define RV 16   // accumulators per work-item

// partial[g] = sum of the g-th contiguous chunk of x: one chunk per
// work-group, one contiguous run per work-item summed in RV lanes, then a
// tree reduction in local memory; the host adds the partials.  Launch: 1-D
// nd-range, power-of-two local size <= RL, one partial per work-group.
__kernel void reduce_sum(__global const T *x, long n, __global T *partial) {
    __local T tile[RL];
    long lid = get_local_id(0);
    long lsz = get_local_size(0);
    long g = get_group_id(0);
    long chunk = (n + (long)get_num_groups(0) - 1) / (long)get_num_groups(0);
    long per = (chunk + lsz - 1) / lsz;
    long begin = g * chunk + lid * per;
    long end = min(min(begin + per, g * chunk + chunk), n);
    T acc[RV];
    for (int v = 0; v < RV; v++) {
        acc[v] = (T)0;
    }
    long i = begin;
    for (; i + RV <= end; i += RV) {
        for (int v = 0; v < RV; v++) {
            acc[v] += x[i + v];
        }
    }
    for (; i < end; i++) {
        acc[0] += x[i];
    }
    for (int w = RV / 2; w > 0; w /= 2) {
        for (int v = 0; v < w; v++) {
            acc[v] += acc[v + w];
        }
    }
    tile[lid] = acc[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long s = lsz / 2; s > 0; s >>= 1) {
        if (lid < s) {
            tile[lid] += tile[lid + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        partial[g] = tile[0];
    }
}
