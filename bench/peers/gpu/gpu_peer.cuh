/*
 * gpu_peer.cuh - what the CUDA C peers of bench/gpu add to
 * bench/peers/compile/xpk_peer.cuh (whose views, range guard, atomics and
 * builtins they use): xpjit's dimension order.  bench/gpu runs the peers
 * on the same buffers with the same kernel parameters as xpjit's kernels,
 * so their work-items must be xpjit's: in a launch of rank R, logical
 * dimension d is hardware dimension R - 1 - d (docs/abi.md, "Dimension
 * order"), the last logical dimension CUDA's x.  G2(d), L2(d), ... are the
 * logical ids of a rank-2 kernel; a rank-1 kernel's are xpk_peer.cuh's
 * GLOBAL_ID(0), LOCAL_ID(0), ... (logical 0 is x).
 */
#ifndef GPU_PEER_CUH
#define GPU_PEER_CUH
#include "xpk_peer.cuh"

#define G2(d) GLOBAL_ID(1 - (d))
#define L2(d) LOCAL_ID(1 - (d))
#define LS2(d) LOCAL_SIZE(1 - (d))
#define GR2(d) GROUP_ID(1 - (d))
/* row-major over the logical ids: (l0 * size1 + l1), x fastest */
#define LOCAL_LINEAR_ID2() (L2(0) * LS2(1) + L2(1))

#endif
