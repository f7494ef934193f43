// histogram.cl - OpenCL C twin of histogram in bench/cpu.xpk (PoCL peer of
// bench/cpu).
#define NBINS 256

// hist[v] += number of bytes equal to v.  Each work-group counts one
// contiguous chunk into a local histogram (local atomics), then adds its
// non-zero bins to hist with global atomics.  hist must be zeroed first.
// Launch: 1-D nd-range.
__kernel void histogram(__global const uchar *data, long n, __global uint *hist) {
    __local uint bins[NBINS];
    long lid = get_local_id(0);
    long lsz = get_local_size(0);
    for (long b = lid; b < NBINS; b += lsz) {
        bins[b] = 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    long chunk = (n + (long)get_num_groups(0) - 1) / (long)get_num_groups(0);
    long begin = (long)get_group_id(0) * chunk;
    long end = min(begin + chunk, n);
    for (long i = begin + lid; i < end; i += lsz) {
        atomic_inc(&bins[data[i]]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long b = lid; b < NBINS; b += lsz) {
        uint count = bins[b];
        if (count != 0) {
            atomic_add(&hist[b], count);
        }
    }
}
