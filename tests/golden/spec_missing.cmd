ir examples/axpy.xpk --kernel convert --dtype T=f32 --ndim 2
