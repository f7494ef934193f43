// reduce_sum.cl - OpenCL C twin of reduce_sum in bench/cpu.xpk (PoCL peer
// of bench/cpu). -DT=float.
#pragma OPENCL FP_CONTRACT OFF
#define RL 256

// partial[g] = sum of the g-th contiguous chunk of x (one chunk per
// work-group; the host adds the partials).  Launch: 1-D nd-range,
// power-of-two local size <= RL, one partial per group.
__kernel void reduce_sum(__global const T *x, long n, __global T *partial) {
    __local T tile[RL];
    long lid = get_local_id(0);
    long lsz = get_local_size(0);
    long chunk = (n + (long)get_num_groups(0) - 1) / (long)get_num_groups(0);
    long begin = (long)get_group_id(0) * chunk;
    long end = min(begin + chunk, n);
    T acc = (T)0;
    for (long i = begin + lid; i < end; i += lsz) {
        acc += x[i];
    }
    tile[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long s = lsz / 2; s > 0; s >>= 1) {
        if (lid < s) {
            tile[lid] += tile[lid + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        partial[get_group_id(0)] = tile[0];
    }
}
