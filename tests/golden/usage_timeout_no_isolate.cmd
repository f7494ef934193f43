emit examples/reduce.xpk --kernel block_sum --dtype T=f32 --target cpu --no-isolate --timeout 100
