ir examples/axpy.xpk --kernel axpy --dtype T=f32 --ndim 2
