"""Records where the library of the source tree this package is built from
lies (python/xpjit/_where.py), so that an installed package finds it
without XPJIT_LIBRARY, and builds the C launch path (xpjit/_fast.c);
everything else is in pyproject.toml."""
import os

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = os.path.join(os.path.dirname(HERE), "build", "lib",
                           "libxpjit.so")
        target = os.path.join(self.build_lib, "xpjit", "_where.py")
        with open(target, "w") as f:
            f.write("# written by setup.py when the package was built\n")
            f.write("LIBRARY = %r\n" % (lib if os.path.exists(lib) else None))


# the C launch path (optional: without a compiler or Python's headers the
# package runs in pure Python)
fast = Extension("xpjit._fast", ["xpjit/_fast.c"],
                 include_dirs=[os.path.join(os.path.dirname(HERE), "include")],
                 optional=True)

setup(cmdclass={"build_py": BuildPy}, ext_modules=[fast])
