// jacobi5.cl - OpenCL C twins of jacobi5_interior and jacobi5_edges in
// bench/cpu.xpk (PoCL peer of bench/cpu). -DT=float.  Row-major ny x nx
// grids.
#pragma OPENCL FP_CONTRACT OFF

// One Jacobi sweep: interior points = average of the four neighbours.
// Launch: 2-D range (nx - 2, ny - 2); dimension 0 is the column.
__kernel void jacobi5_interior(__global const T *u, __global T *out, long ny, long nx) {
    long j = get_global_id(0) + 1;
    long i = get_global_id(1) + 1;
    out[i * nx + j] = (T)0.25 * (u[(i - 1) * nx + j] + u[(i + 1) * nx + j]
                                 + u[i * nx + j - 1] + u[i * nx + j + 1]);
}

// The boundary: out = u on the first and last rows and columns.
// Launch: 1-D range of 2 * nx + 2 * (ny - 2).
__kernel void jacobi5_edges(__global const T *u, __global T *out, long ny, long nx) {
    long k = get_global_id(0);
    long i = 0, j = 0;
    if (k < nx) {
        j = k;
    } else if (k < 2 * nx) {
        i = ny - 1;
        j = k - nx;
    } else if (k < 2 * nx + ny - 2) {
        i = k - 2 * nx + 1;
    } else {
        i = k - 2 * nx - (ny - 2) + 1;
        j = nx - 1;
    }
    out[i * nx + j] = u[i * nx + j];
}
