ir tests/golden/constgen.xpk --kernel stencil --dtype T=f32 --const TS=0x8
