/* headers.cpp - every public header, included from C++ and used: the
 * library's headers must compile as C++ (g++ and clang++, C++11 and
 * C++17, -Wall -Wextra -Werror -pedantic). Compiled by tests/cxx.sh. */
#include "xpjit.h"
#include "xpjit_cache.h"
#include "xpjit_codegen.h"
#include "xpjit_compiler.h"
#include "xpjit_ir.h"
int main() {
  float x[4] = {0, 0, 0, 0};
  xpj_array a = xpj_array_1d(x, XPJ_F32, 4);
  xpj_arg args[] = {xpj_arg_f32(1.0f), xpj_arg_array(&a), xpj_arg_i64(3)};
  xpj_range r = xpj_range_2d(4, 4, 2, 2);
  xpj_queue_desc d = {};
  return (int)(d.flags + r.ndim + args[0].kind);
}
