ir examples/reduce.xpk --kernel block_sum --dtype T=f64
