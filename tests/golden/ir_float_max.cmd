ir examples/atomics.xpk --kernel float_max --dtype T=f32 --ndim 1
