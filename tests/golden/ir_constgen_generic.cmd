ir tests/golden/constgen.xpk
