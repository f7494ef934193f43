// histogram.cl - OpenCL C twin of histogram in bench/cpu.xpk (PoCL peer of
// bench/cpu).
#define NBINS 256

// hist[v] += number of bytes equal to v.  Each work-group counts one
// contiguous chunk (one contiguous run per work-item) into a local
// histogram with local atomics, then adds its non-zero bins to hist with
// global atomics.  hist must be zeroed first.  Launch: 1-D nd-range.
__kernel void histogram(__global const uchar *data, long n, __global uint *hist) {
    __local uint bins[NBINS];
    long lid = get_local_id(0);
    long lsz = get_local_size(0);
    for (long b = lid; b < NBINS; b += lsz) {
        bins[b] = 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    long chunk = (n + (long)get_num_groups(0) - 1) / (long)get_num_groups(0);
    long per = (chunk + lsz - 1) / lsz;
    long g = get_group_id(0);
    long begin = g * chunk + lid * per;
    long end = min(min(begin + per, g * chunk + chunk), n);
    for (long i = begin; i < end; i++) {
        atomic_add(&bins[data[i]], 1u);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long b = lid; b < NBINS; b += lsz) {
        uint count = bins[b];
        if (count != 0) {
            atomic_add(&hist[b], count);
        }
    }
}
