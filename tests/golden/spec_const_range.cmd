ir tests/golden/constgen.xpk --kernel stencil --dtype T=i32 --const TS=9223372036854775808 --hash
