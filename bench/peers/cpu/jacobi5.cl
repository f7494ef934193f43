// jacobi5.cl - OpenCL C twin of jacobi5 in bench/cpu.xpk (PoCL peer of
// bench/cpu). -DT=float.  Row-major ny x nx grids.
#pragma OPENCL FP_CONTRACT OFF

// One Jacobi sweep: interior points = average of the four neighbours,
// boundary points copied.  Launch: 2-D range (nx, ny); dimension 0 is the
// column.
__kernel void jacobi5(__global const T *u, __global T *out, long ny, long nx) {
    long j = get_global_id(0);
    long i = get_global_id(1);
    if (i == 0 || j == 0 || i == ny - 1 || j == nx - 1) {
        out[i * nx + j] = u[i * nx + j];
    } else {
        out[i * nx + j] = (T)0.25 * (u[(i - 1) * nx + j] + u[(i + 1) * nx + j]
                                     + u[i * nx + j - 1] + u[i * nx + j + 1]);
    }
}
