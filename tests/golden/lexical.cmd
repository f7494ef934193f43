check tests/golden/lexical.xpk
