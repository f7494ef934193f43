ir examples/axpy.xpk --kernel axpy --dtype T=bool --ndim 1
