// nbody.cl - OpenCL C twin of nbody in bench/cpu.xpk (PoCL peer of
// bench/cpu). -DT=float.  p: rows x, y, z, mass of n bodies (4 x n,
// row-major); v, vnew, acc: rows x, y, z (3 x n).
#pragma OPENCL FP_CONTRACT OFF

// One all-pairs step: acc_i = sum over j of m_j d / (|d|^2 + eps2)^(3/2),
// d = p_j - p_i; vnew = v + dt * acc.  Launch: 1-D range (n).
__kernel void nbody(__global const T *p, __global const T *v, __global T *vnew,
                    __global T *acc, long n, T dt, T eps2) {
    long i = get_global_id(0);
    T xi = p[i], yi = p[n + i], zi = p[2 * n + i];
    T ax = (T)0, ay = (T)0, az = (T)0;
    for (long j = 0; j < n; j++) {
        T dx = p[j] - xi;
        T dy = p[n + j] - yi;
        T dz = p[2 * n + j] - zi;
        T inv = rsqrt(dx * dx + dy * dy + dz * dz + eps2);
        T s = p[3 * n + j] * inv * inv * inv;
        ax += s * dx;
        ay += s * dy;
        az += s * dz;
    }
    acc[i] = ax;
    acc[n + i] = ay;
    acc[2 * n + i] = az;
    vnew[i] = v[i] + dt * ax;
    vnew[n + i] = v[n + i] + dt * ay;
    vnew[2 * n + i] = v[2 * n + i] + dt * az;
}
