ir tests/golden/constgen.xpk --kernel stencil --dtype T=f32 --dtype TS=16
