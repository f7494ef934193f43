check tests/golden/errors.xpk
