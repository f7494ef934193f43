ir examples/matmul.xpk --kernel matmul_tiled --dtype T=f32
