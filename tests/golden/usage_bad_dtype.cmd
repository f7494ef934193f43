ir examples/axpy.xpk --kernel axpy --dtype T=float --ndim 1
