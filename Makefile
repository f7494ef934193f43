# xpjit - build, test, sanitize, fuzz, bench, install.
#
#   make              libxpjit.a, libxpjit.so, xpjit-cli   (in build/)
#   make test         unit tests, golden tests, fuzz corpus replay
#   make asan         the whole test suite under ASan + UBSan (in build-asan/)
#   make tsan         the multi-threaded tests under ThreadSanitizer (clang)
#   make fuzz         libFuzzer on each fuzz target (FUZZ_TIME seconds each)
#   make bench        benchmarks under bench/
#   make install PREFIX=/usr/local

BUILD    ?= build
PREFIX   ?= /usr/local
CC       ?= cc
FUZZ_CC  ?= clang
FUZZ_CXX ?= clang++
FUZZ_TIME ?= 60

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CSTD     := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
OPT      ?= -O2 -g
SAN      ?=
LLVM_CONFIG ?= llvm-config-22
LLVM_INC := $(shell $(LLVM_CONFIG) --includedir)
LLVM_LIBDIR := $(shell $(LLVM_CONFIG) --libdir)
# The library and its LLVM plugin pass each other their structures: both
# must be built from the same headers (compiler/llvm.h).
BUILD_ID := $(shell cat include/*.h ir/*.h compiler/*.h runtime/*.h cache/*.h | sha256sum | cut -c1-16)
CFLAGS_ALL = $(CSTD) $(WARN) $(OPT) $(SAN) -fPIC \
             -DXPJ_LIBEXECDIR='"$(PREFIX)/libexec/xpjit"' \
             -DXPJ_LIBDIR='"$(PREFIX)/lib"' -DXPJ_BUILD_ID='"$(BUILD_ID)"' \
             -Iinclude -Iir -Icompiler -Iruntime -isystem $(LLVM_INC) $(CFLAGS)
# libxpjit does not link LLVM (docs/api.md, "Where LLVM is loaded").
# not SQLite: libxpjit loads it when a cache first opens a database
# (cache/sqlite_dl.h); only the programs that call it themselves link it
CORE_LIBS = -lnettle -lhiredis -lpthread -ldl -lm $(LDLIBS)
SQLITE_LIBS = -lsqlite3
# SPIRV-Tools is C++: only in the plugins (compiler/spirv_check.h)
SPIRV_LIBS = -lSPIRV-Tools -lstdc++
# The rpath finds libLLVM where llvm-config says; Debian's package also
# puts it on the loader's path, so its build (debian/rules) leaves it out.
LLVM_RPATH ?= -Wl,-rpath,$(LLVM_LIBDIR)
LLVM_LIBS = -L$(LLVM_LIBDIR) $(LLVM_RPATH) -lLLVM-22
# What a program links to have LLVM in itself (the compile server, the
# daemon, the tests): libxpjit-llvm.a, its table used directly.
LLVM_STATIC = -Wl,-u,xpj_llvm_plugin_api $(LLVM_A)
LDLIBS_ALL = $(LLVM_LIBS) $(SPIRV_LIBS) $(CORE_LIBS)
# The compile server, xpjit-cc, has LLVM in itself (LLVM's static
# archives, a position-dependent executable): a fresh server starts
# without loading and relocating libLLVM (10 ms here), most of a
# process's first compile, which took 18-22 ms, 9-12 ms so
# (docs/benchmarks.md, issue 19). Not in the sanitizer builds, and not
# where the archives or zlib's and zstd's development files (which they
# need) are missing: libLLVM then, as everything else links it.
# CSERVER_LLVM=shared chooses that too.
CSERVER_LLVM ?= $(if $(SAN),shared,$(shell test -e $(LLVM_LIBDIR)/libLLVMCore.a && \
                  pkg-config --exists zlib libzstd && echo static || echo shared))
LLVM_COMPONENTS := nvptx x86 spirv passes bitreader bitwriter linker irreader orcjit
# Position-dependent: a static PIE has 66,000 relocations to apply at
# each start (1-3 ms more); the Debian package, hardened, keeps PIE
# (debian/rules sets this empty).
CSERVER_PIE ?= -no-pie
# BOLT (llvm-bolt, Debian's bolt-22): the compile server's code, LLVM's
# above all, laid out by a profile of its own compiles (xpjit-cc --train
# on tests/conformance, not the benchmark's kernels): 15-20% faster PTX
# compiles (docs/benchmarks.md, issue 19, twenty-sixth session). Only for
# the static server (BOLT rewrites the executable, not libLLVM); off where
# llvm-bolt is missing, and with BOLT=off. Its cost: about 75 s on a first
# build (instrumenting 45 s, the training 6 s, the rewrite 25 s), the
# rewrite alone on a relink (the profile is kept: the hot code is LLVM's,
# which our changes do not move).
LLVM_BINDIR := $(shell $(LLVM_CONFIG) --bindir)
BOLT ?= $(if $(wildcard $(LLVM_BINDIR)/llvm-bolt),on,off)
ifeq ($(BOLT),on)
ifneq ($(CSERVER_LLVM)$(SAN),static)
ifeq ($(origin BOLT),command line)
$(warning BOLT=on: no BOLT for a compile server on libLLVM or a sanitizer build)
endif
override BOLT := off
endif
endif
ifeq ($(CSERVER_LLVM),static)
CSERVER_LIBS = $(CSERVER_PIE) -Wl,--gc-sections -L$(LLVM_LIBDIR) \
               $(shell $(LLVM_CONFIG) --link-static --libs $(LLVM_COMPONENTS)) \
               $(shell pkg-config --libs zlib libzstd) $(SPIRV_LIBS) $(CORE_LIBS)
else
CSERVER_LIBS = $(LDLIBS_ALL)
endif

LIB_SRCS := $(wildcard ir/*.c) $(wildcard compiler/*.c) $(wildcard runtime/*.c) \
            $(wildcard cache/*.c)
# Everything that calls LLVM: libxpjit-llvm (compiler/llvm.h).
LLVM_SRCS := compiler/codegen.c compiler/target_cpu.c compiler/target_ptx.c \
             compiler/target_spirv.c compiler/uniform.c compiler/compile_llvm.c \
             compiler/cpu_orc.c compiler/spirv_tools.c
CORE_SRCS := $(filter-out $(LLVM_SRCS),$(LIB_SRCS))
CORE_OBJS := $(CORE_SRCS:%.c=$(BUILD)/obj/%.o)
# The one C++ file: what the LLVM C API cannot do (compiler/llvm_emit.cpp)
LLVM_CXX_SRCS := compiler/llvm_emit.cpp
LLVM_OBJS := $(LLVM_SRCS:%.c=$(BUILD)/obj/%.o) $(LLVM_CXX_SRCS:%.cpp=$(BUILD)/obj/%.o)
# the plugin's own copies of what the LLVM objects call in the library
LLVM_SO_OBJS := $(LLVM_OBJS) $(BUILD)/obj/ir/ir.o $(BUILD)/obj/ir/alloc.o
CLI_SRCS := tools/xpjit-cli.c tools/cli_args.c tools/cli_out.c tools/cli_cache.c \
            tools/cli_daemon.c
# The CLI writes its JSON with jansson (Debian: libjansson-dev).
JANSSON_CFLAGS := $(shell pkg-config --cflags jansson 2>/dev/null)
JANSSON_LIBS := $(shell pkg-config --libs jansson 2>/dev/null || echo -ljansson)
TEST_SRCS := $(wildcard tests/test_*.c)
TESTS    := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
# Stand-in driver libraries (libcuda, the Level Zero loader) that record
# what the backends pass them: tests of marshalling and error paths.
MOCKS    := $(patsubst tests/mock/%.c,$(BUILD)/tests/mock/lib%.so,$(wildcard tests/mock/*.c))
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
REPLAYS  := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/replay_%)

VERSION  := $(shell sed -n 's/^\#define XPJ_VERSION_STRING "\(.*\)"/\1/p' include/xpjit_ir.h)
# What applications link: libxpjit.a (one object, only the public API
# global) and libxpjit.so.VERSION (soname libxpjit.so.0, symbols of version
# XPJIT_0), with the libxpjit.so.0 and libxpjit.so links of a real install.
LIB_A    := $(BUILD)/lib/libxpjit.a
LIB_SO_V := $(BUILD)/lib/libxpjit.so.$(VERSION)
LIB_SO   := $(BUILD)/lib/libxpjit.so
LIB_SO0  := $(BUILD)/lib/libxpjit.so.0
# What xpjit's own programs and tests link: every object, internal names
# global (they call rt_*, xpd_*, cg_* across objects).
LIB_INT  := $(BUILD)/obj/libxpjit-internal.a
LLVM_A   := $(BUILD)/lib/libxpjit-llvm.a
LLVM_SO  := $(BUILD)/lib/libxpjit-llvm.so.0
SPIRV_SO := $(BUILD)/lib/libxpjit-spirv.so.0
CLI      := $(BUILD)/bin/xpjit-cli
DAEMON   := $(BUILD)/bin/xpjitd
DAEMON_SRCS := tools/xpjitd.c tools/xpjitd_worker.c tools/xpjitd_progs.c
# The compile server (compiler/cserver.c), found by the library beside
# itself or its program: ../libexec/xpjit/xpjit-cc.
CSERVER  := $(BUILD)/libexec/xpjit/xpjit-cc
# Man pages from docs/man/*.scd (scdoc, from Debian); xpjit(7)'s list of
# variables is the CLI's table (ir/env.c). Left out, with a note, where
# scdoc is missing.
SCDOC ?= $(shell command -v scdoc 2>/dev/null)
MANS := $(if $(SCDOC),$(BUILD)/man/xpjit-cli.1 $(BUILD)/man/xpjitd.8 $(BUILD)/man/xpjit.7)
EXAMPLE_SRCS := $(wildcard examples/*.c)
EXAMPLES := $(EXAMPLE_SRCS:examples/%.c=$(BUILD)/examples/%)

.PHONY: all test asan tsan fuzz bench install clean check-examples demo format mpi-example
# (a recipe that fails leaves no half-written target that looks up to date)
.DELETE_ON_ERROR:
# The Python package's C launch path (python/xpjit/_fast.c), built in place
# for make test and PYTHONPATH=python; without Python's headers it is left
# out and the package runs in pure Python. It links nothing of ours (the
# package hands it the library's functions) and does not depend on BUILD.
PYTHON_CONFIG ?= $(shell command -v python3-config 2>/dev/null)
PY_FAST := $(if $(PYTHON_CONFIG),python/xpjit/_fast$(shell $(PYTHON_CONFIG) --extension-suffix))

all: $(LIB_A) $(LIB_SO_V) $(LIB_SO0) $(LIB_SO) $(LLVM_A) $(LLVM_SO) $(SPIRV_SO) $(CLI) $(DAEMON) $(CSERVER) $(BUILD)/lib/xpjit.pc \
     $(BUILD)/lib/xpjit-uninstalled.pc $(EXAMPLES) $(PY_FAST) $(MANS)
ifeq ($(SCDOC),)
	@echo "note: no scdoc (sh tools/deps.sh installs it): man pages not built"
endif


ifneq ($(PY_FAST),)
$(PY_FAST): python/xpjit/_fast.c include/xpjit.h include/xpjit_ir.h
	$(CC) -std=c11 -O2 -g $(WARN) -Wno-missing-field-initializers -fPIC \
	  -shared $(shell $(PYTHON_CONFIG) --includes) -Iinclude -o $@ $<
endif

$(BUILD)/obj/%.o: %.c $(wildcard include/*.h ir/*.h compiler/*.h runtime/*.h cache/*.h) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

# LLVM's C++ headers, as llvm-config says to compile against them
CXXFLAGS_BASE = $(shell $(LLVM_CONFIG) --cxxflags) -fno-rtti -Wall -Wextra -Werror \
                -Wno-unused-parameter -Icompiler
CXXFLAGS_LLVM = $(CXXFLAGS_BASE) $(OPT) $(SAN) -fPIC $(CXXFLAGS)
$(BUILD)/obj/%.o: %.cpp compiler/llvm_emit.h Makefile
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_LLVM) -c $< -o $@

$(LIB_INT): $(CORE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# The static library: the objects linked into one (ld -r), then every
# global the shared library does not export made local, so rt_err,
# cg_call, xpd_connect, ... cannot collide with an application's names.
$(LIB_A): $(CORE_OBJS) $(LIB_SO_V)
	@mkdir -p $(dir $@) $(BUILD)/obj
	ld -r -o $(BUILD)/obj/libxpjit-all.o $(CORE_OBJS)
	nm -D --defined-only $(LIB_SO_V) | \
	  awk '$$3 != "" && $$3 !~ /^XPJIT_/ {sub(/@.*/, "", $$3); print $$3}' \
	  > $(BUILD)/obj/libxpjit.exports
	objcopy --keep-global-symbols=$(BUILD)/obj/libxpjit.exports \
	  $(BUILD)/obj/libxpjit-all.o $(BUILD)/obj/libxpjit.o
	rm -f $@
	ar rcs $@ $(BUILD)/obj/libxpjit.o

# --no-undefined: every symbol resolved when it is linked, so that nothing
# calls SQLite but through cache/sqlite_dl.h (the library does not link it);
# not with a sanitizer, whose runtime clang leaves to the program
$(LIB_SO_V): $(CORE_OBJS) tools/libxpjit.map
	@mkdir -p $(dir $@)
	$(CC) $(SAN) $(LDFLAGS) -shared -Wl,-soname,libxpjit.so.0 \
	  -Wl,--version-script=tools/libxpjit.map -Wl,-Bsymbolic-functions \
	  $(if $(SAN),,-Wl,--no-undefined) \
	  -o $@ $(CORE_OBJS) $(CORE_LIBS)

$(LIB_SO0): $(LIB_SO_V)
	ln -sf libxpjit.so.$(VERSION) $@

$(LIB_SO): $(LIB_SO0)
	ln -sf libxpjit.so.0 $@

$(LLVM_A): $(LLVM_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# The plugin exports its table and nothing else.
$(LLVM_SO): $(LLVM_SO_OBJS) tools/libxpjit-llvm.map
	@mkdir -p $(dir $@)
	$(CC) $(SAN) $(LDFLAGS) -shared -Wl,-soname,libxpjit-llvm.so.0 -Wl,--exclude-libs,ALL \
	  -Wl,--version-script=tools/libxpjit-llvm.map -o $@ $(LLVM_SO_OBJS) \
	  $(LLVM_LIBS) $(SPIRV_LIBS) $(CORE_LIBS)

# The SPIR-V validator (SPIRV-Tools, C++) that libxpjit loads before a
# driver takes SPIR-V; it exports its table and nothing else.
$(SPIRV_SO): $(BUILD)/obj/compiler/spirv_tools.o tools/libxpjit-spirv.map
	@mkdir -p $(dir $@)
	$(CC) $(SAN) $(LDFLAGS) -shared -Wl,-soname,libxpjit-spirv.so.0 -Wl,--exclude-libs,ALL \
	  -Wl,--version-script=tools/libxpjit-spirv.map -o $@ $< $(SPIRV_LIBS)

# The CLI compiles through the compile server or the plugin: no LLVM here.
$(CLI): $(CLI_SRCS) tools/cli.h compiler/diag.h $(LIB_INT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(JANSSON_CFLAGS) $(LDFLAGS) -o $@ $(CLI_SRCS) $(LIB_INT) $(CORE_LIBS) $(JANSSON_LIBS)

# The daemon never loads LLVM; its workers load the plugin it opened at
# its start (docs/daemon.md, "Workers").
$(DAEMON): $(DAEMON_SRCS) tools/xpjitd.h $(LIB_INT) | $(LLVM_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $(DAEMON_SRCS) $(LIB_INT) $(CORE_LIBS)

# (relinked when CSERVER_LLVM, CSERVER_PIE or BOLT changes: a file named
# after them)
CSERVER_MODE := $(BUILD)/obj/cserver-llvm-$(CSERVER_LLVM)$(subst -,,$(CSERVER_PIE))-bolt$(BOLT)
$(CSERVER_MODE):
	@mkdir -p $(dir $@)
	@rm -f $(BUILD)/obj/cserver-llvm-*
	@touch $@

ifeq ($(BOLT),on)
# The server as linked (with its relocations, which BOLT needs to move
# code), its profile, and the server laid out by it. tests/bolt.sh checks
# that both make the same bytes.
CSERVER_PLAIN := $(BUILD)/obj/xpjit-cc.plain
LLVM_VERSION := $(shell $(LLVM_CONFIG) --version)
BOLT_PROFILE := $(BUILD)/obj/xpjit-cc-llvm$(LLVM_VERSION).fdata
BOLT_TRAIN := $(sort $(wildcard tests/conformance/*.xpk))
# (-plt=hot calls libc's hot functions without the PLT; it needs the
# symbols bound at start, -z now: 495 of them, no slower a first compile)
BOLT_OPTS := -reorder-blocks=ext-tsp -reorder-functions=cdsort \
             -split-functions -split-all-cold -split-eh -use-gnu-stack \
             -plt=hot -peepholes=all -indirect-call-promotion=all \
             -jump-tables=move -frame-opt=hot -update-debug-sections
# (rewritten when the options change: a file named after them)
BOLT_STAMP := $(BUILD)/obj/bolt-opts-$(shell echo '$(BOLT_OPTS)' | cksum | cut -d' ' -f1)
$(BOLT_STAMP):
	@mkdir -p $(dir $@)
	@rm -f $(BUILD)/obj/bolt-opts-*
	@touch $@
$(CSERVER_PLAIN): tools/xpjit-cc.c compiler/worker.h $(LIB_INT) $(LLVM_A) $(CSERVER_MODE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS) -Wl,--emit-relocs,-z,now -o $@ tools/xpjit-cc.c $(LLVM_STATIC) $(LIB_INT) $(CSERVER_LIBS)
# An instrumented copy of the plain server compiles the training kernels
# and writes its counters at exit. Made again for another LLVM (its
# version names the file), training set or training code, not when the
# server is relinked: the functions a change of ours moves lose their
# profile (the rewrite says how many), LLVM's keep theirs; `rm
# $(BUILD)/obj/xpjit-cc-*.fdata` makes it again. The training runs in an
# environment of its own: no XPJIT_* of the builder, no cache (nothing
# written to the builder's home); CUDA_HOME (libdevice) and
# LD_LIBRARY_PATH passed on.
$(BOLT_PROFILE): $(BOLT_TRAIN) tools/xpjit-cc.c | $(CSERVER_PLAIN)
	@echo "BOLT: profiling the compile server (once per build directory and LLVM)"
	@rm -f $@.tmp $(BUILD)/obj/xpjit-cc.inst $(BUILD)/obj/xpjit-cc-*.fdata
	@if $(LLVM_BINDIR)/llvm-bolt $(CSERVER_PLAIN) -instrument \
	    -instrumentation-file=$(abspath $@.tmp) -o $(BUILD)/obj/xpjit-cc.inst \
	    > $(BUILD)/obj/bolt-instrument.log 2>&1 && \
	  env -i PATH="$$PATH" HOME=/nonexistent XPJIT_CACHE=off \
	    $${CUDA_HOME:+CUDA_HOME="$$CUDA_HOME"} \
	    $${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$$LD_LIBRARY_PATH"} \
	    $(BUILD)/obj/xpjit-cc.inst --train $(BOLT_TRAIN) && [ -s $@.tmp ]; then \
	  mv $@.tmp $@; \
	else \
	  tail -n 5 $(BUILD)/obj/bolt-instrument.log; \
	  echo "warning: BOLT: the profile run failed: the compile server is not laid out (rm $@ to try again; BOLT=off not to)"; \
	  rm -f $@.tmp; : > $@; \
	fi
	@rm -f $(BUILD)/obj/xpjit-cc.inst
# Written beside and renamed: a server running from this file (a test, a
# program) keeps its image, and a failed rewrite leaves no half a server.
# BOLT is an optimisation: where it fails, the server is the plain one,
# with a warning (tests/bolt.sh, which CI requires, then fails).
$(CSERVER): $(CSERVER_PLAIN) $(BOLT_PROFILE) $(BOLT_STAMP)
	@mkdir -p $(dir $@)
	@rm -f $@.tmp $(BUILD)/obj/bolt.log
	@if [ -s $(BOLT_PROFILE) ] && \
	  $(LLVM_BINDIR)/llvm-bolt $(CSERVER_PLAIN) -data=$(BOLT_PROFILE) $(BOLT_OPTS) \
	    -o $@.tmp > $(BUILD)/obj/bolt.log 2>&1; then \
	  echo "BOLT: $@ laid out by $(BOLT_PROFILE)"; \
	  grep -E 'invalid \(possibly stale\) profile' $(BUILD)/obj/bolt.log | sed 's/^/BOLT: /' || true; \
	else \
	  [ ! -s $(BUILD)/obj/bolt.log ] || tail -n 5 $(BUILD)/obj/bolt.log; \
	  echo "warning: BOLT: $@ is the plain server, not laid out (rm $@ to try again; BOLT=off not to)"; \
	  cp $(CSERVER_PLAIN) $@.tmp; \
	fi
	mv -f $@.tmp $@
else
# (no plain server left from a build with BOLT: tests/bolt.sh would pair
# the two)
$(CSERVER): tools/xpjit-cc.c compiler/worker.h $(LIB_INT) $(LLVM_A) $(CSERVER_MODE)
	@mkdir -p $(dir $@)
	@rm -f $(BUILD)/obj/xpjit-cc.plain
	$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ tools/xpjit-cc.c $(LLVM_STATIC) $(LIB_INT) $(CSERVER_LIBS)
endif

# Example programs: use libxpjit as an application would (public headers
# only; LLVM, when they compile in their process, is the plugin).
$(BUILD)/examples/%: examples/%.c $(LIB_A) include/xpjit.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT) $(SAN) -Iinclude -o $@ $< $(LIB_A) $(CORE_LIBS)

$(BUILD)/man/%: docs/man/%.scd
	@mkdir -p $(dir $@)
	$(SCDOC) < $< > $@

$(BUILD)/man/xpjit.7: docs/man/xpjit.7.scd.in tools/env2scd.awk $(CLI)
	@mkdir -p $(dir $@)
	{ cat docs/man/xpjit.7.scd.in && \
	  $(CLI) env --markdown --all | awk -f tools/env2scd.awk && \
	  printf '# SEE ALSO\n\n*xpjit-cli*(1), *xpjitd*(8); docs/environment.md in the source tree.\n'; \
	} > $@.scd
	$(SCDOC) < $@.scd > $@
	rm -f $@.scd

$(BUILD)/lib/xpjit.pc: tools/xpjit.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' $< > $@

# pkg-config's convention for a build tree: with PKG_CONFIG_PATH=build/lib,
# "pkg-config xpjit" reads this file (the headers of the source tree, the
# libraries of build/lib, an rpath to them).
$(BUILD)/lib/xpjit-uninstalled.pc: tools/xpjit-uninstalled.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@SRCDIR@|$(CURDIR)|g' -e 's|@LIBDIR@|$(abspath $(BUILD))/lib|g' \
	  -e 's|@VERSION@|$(VERSION)|g' $< > $@

$(BUILD)/tests/%: tests/%.c tests/testutil.h tests/devtest.h tests/storm20.h tests/procutil.h $(wildcard tests/*.inc tests/conformance/*.h) $(LIB_INT) $(LLVM_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests -o $@ $< $(LLVM_STATIC) $(LIB_INT) -lcmocka $(LDLIBS_ALL) \
	  $(if $(filter test_cache test_kcache,$*),$(SQLITE_LIBS))

# An application's view: libxpjit without libxpjit-llvm (docs/api.md,
# "Where LLVM is loaded"); it must not map libLLVM unless it compiles.
$(BUILD)/tests/test_lazy_llvm: tests/test_lazy_llvm.c $(LIB_INT) $(LLVM_SO) $(SPIRV_SO) $(CSERVER)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests -o $@ $< $(LIB_INT) -lcmocka $(CORE_LIBS)

# Fuzz targets built with a plain main() that replays files: runs anywhere.
$(BUILD)/fuzz/replay_%: tests/fuzz/%.c tests/fuzz/replay_main.c $(LIB_INT) $(LLVM_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< tests/fuzz/replay_main.c $(LLVM_STATIC) $(LIB_INT) $(LDLIBS_ALL)

$(BUILD)/tests/mock/lib%.so: tests/mock/%.c $(wildcard tests/mock/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT) $(SAN) -fPIC -shared -Itests/mock -o $@ $<

test: all $(TESTS) $(REPLAYS) $(MOCKS) $(BUILD)/bench/gpu
	@BUILD=$(BUILD) sh tests/run_tests.sh

asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" test

# ThreadSanitizer (clang): the tests that drive the public API from many
# threads, and the daemon (its loop and parse threads); any report fails
# the run (halt_on_error).
# test_cuda and test_ze: queues of devices with streams (stand-in drivers),
# whose commands a waiting thread submits (runtime/queue.c help_streams)
TSAN_TESTS := test_threads test_redis test_daemon test_cuda test_ze
tsan:
	$(MAKE) BUILD=build-tsan CC=clang CXX=clang++ OPT="-O1 -g" SAN="-fsanitize=thread" \
	  $(TSAN_TESTS:%=build-tsan/tests/%) build-tsan/libexec/xpjit/xpjit-cc \
	  build-tsan/bin/xpjitd build-tsan/lib/libxpjit-llvm.so.0 build-tsan/lib/libxpjit-spirv.so.0 \
	  $(patsubst tests/mock/%.c,build-tsan/tests/mock/lib%.so,$(wildcard tests/mock/*.c))
	@rm -rf build-tsan/test-cache
	@for t in $(TSAN_TESTS); do echo "=== tsan: $$t"; \
	  BUILD=build-tsan XPJIT_DAEMON=off XPJIT_CACHE_DIR=$$PWD/build-tsan/test-cache \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 $$TSAN_OPTIONS" \
	  build-tsan/tests/$$t || exit 1; done

# libFuzzer (clang) with ASan + UBSan; corpus grows in tests/fuzz/corpus/NAME.
fuzz: $(FUZZ_SRCS:tests/fuzz/%.c=build-fuzz/%)
	@for t in $^; do n=$$(basename $$t); mkdir -p tests/fuzz/corpus/$$n; \
	  echo "fuzzing $$n for $(FUZZ_TIME)s"; \
	  $$t -max_total_time=$(FUZZ_TIME) -max_len=65536 -timeout=10 \
	    -rss_limit_mb=2048 -print_final_stats=1 \
	    -dict=tests/fuzz/xpk.dict tests/fuzz/corpus/$$n || exit 1; done

build-fuzz/llvm_emit.o: $(LLVM_CXX_SRCS) compiler/llvm_emit.h Makefile
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(CXXFLAGS_BASE) -g -O1 \
	  -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
	  -c -o $@ $<

build-fuzz/%: tests/fuzz/%.c $(LIB_SRCS) build-fuzz/llvm_emit.o $(wildcard include/*.h ir/*.h compiler/*.h runtime/*.h cache/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CSTD) -g -O1 -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=all -Iinclude -Iir -Icompiler -Iruntime -isystem $(LLVM_INC) \
	  -o $@ $< $(LIB_SRCS) build-fuzz/llvm_emit.o $(LDLIBS_ALL)

bench: all $(BUILD)/bench/frontend $(BUILD)/bench/compile $(BUILD)/bench/cpu $(BUILD)/bench/cache $(BUILD)/bench/daemon $(BUILD)/bench/opencl $(BUILD)/bench/groups $(BUILD)/bench/launch $(BUILD)/bench/gpu
	sh tools/bench-deps.sh
	$(BUILD)/bench/frontend examples/*.xpk bench/peers/frontend_peer.xpk
	rm -rf $(BUILD)/bench/ptx
	$(BUILD)/bench/compile --fresh 11 --startup 7 --save-ptx $(BUILD)/bench/ptx examples/*.xpk
	$$HOME/.cache/xpjit/venv-bench/bin/python bench/ptx_quality.py $(BUILD)/bench/ptx
	OCL_ICD_VENDORS=$${OCL_ICD_VENDORS:-$$HOME/.cache/xpjit/intel-opencl/icd} $(BUILD)/bench/cpu
	$(BUILD)/bench/cache
	$(BUILD)/bench/daemon
	$(BUILD)/bench/groups
	OCL_ICD_VENDORS=$${OCL_ICD_VENDORS:-$$HOME/.cache/xpjit/intel-opencl/icd} $(BUILD)/bench/opencl
	OCL_ICD_VENDORS=$${OCL_ICD_VENDORS:-$$HOME/.cache/xpjit/intel-opencl/icd} \
	  $$HOME/.cache/xpjit/venv-bench/bin/python bench/python_launch.py --build $(BUILD)

# CPU kernels: xpjit's CPU device vs xpjit's SPIR-V on Intel's OpenCL CPU
# runtime (xpjit's OpenCL device) vs OpenMP C vs OpenCL C on PoCL
# (libOpenCL loaded at run time). The OpenMP peer is compiled -O3
# -march=native in its own file.
$(BUILD)/bench/cpu: bench/cpu.c bench/cpu_omp.c $(LIB_INT) bench/bench_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O3 -march=native -fopenmp -c bench/cpu_omp.c -o $(BUILD)/bench/cpu_omp.o
	$(CC) $(CFLAGS_ALL) -fopenmp -o $@ bench/cpu.c $(BUILD)/bench/cpu_omp.o $(LIB_INT) $(CORE_LIBS)

# One launch and wait of a cached kernel from C: bench/python_launch.py's
# reference for the cost the Python package adds.
$(BUILD)/bench/launch: bench/launch.c $(LIB_INT) bench/bench_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_INT) $(CORE_LIBS)

$(BUILD)/bench/compile: bench/compile.c $(LIB_INT) bench/bench_util.h bench/nvrtc.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_INT) $(CORE_LIBS)

# xpjitd: hit latency through the daemon with 1/8/64 clients; the start-up
# storm with and without the daemon (peer: every process compiling).
$(BUILD)/bench/daemon: bench/daemon.c tests/storm20.h $(LIB_INT) bench/bench_util.h $(DAEMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ bench/daemon.c $(LIB_INT) $(CORE_LIBS)

# OpenCL (SPIR-V on Intel's CPU runtime): kernels ready per fresh context,
# cold vs SPIR-V cached (peer) vs the driver's binary cached.
$(BUILD)/bench/opencl: bench/opencl.c tests/storm20.h $(LIB_INT) bench/bench_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ bench/opencl.c $(LIB_INT) $(CORE_LIBS)

# Compile cache: cold compile vs second- and first-level hits, whole-process
# cold vs warm; peer PoCL's kernel cache (libOpenCL loaded at run time).

$(BUILD)/bench/cache: bench/cache.c $(LIB_INT) bench/bench_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_INT) $(CORE_LIBS) $(SQLITE_LIBS)

# GPU kernels: xpjit's PTX through the CUDA backend against CUDA C twins
# (bench/peers/gpu) compiled by NVRTC; libcuda and libnvrtc loaded at run
# time. Only a dry run here (make test); tests/gpu.sh runs it on a GPU.
$(BUILD)/bench/gpu: bench/gpu.c $(LIB_INT) bench/bench_util.h bench/nvrtc.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_INT) $(CORE_LIBS)

# Narrow and wide required local sizes on the CPU device (docs/abi.md).
$(BUILD)/bench/groups: bench/groups.c $(LIB_INT) bench/bench_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_INT) $(CORE_LIBS)

$(BUILD)/bench/frontend: bench/frontend.c $(LIB_INT) bench/bench_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_INT) $(CORE_LIBS)

check-examples: $(CLI)
	$(CLI) check examples/*.xpk

# The main job: run the example programs on the default device (the CPU
# unless XPJIT_DEVICE says otherwise), then compile kernels for the three
# targets (SPIR-V validated, PTX, native object for this CPU).
demo: all
	$(BUILD)/examples/saxpy
	$(BUILD)/examples/reduction
	$(BUILD)/examples/matmul
	$(BUILD)/examples/half
	$(CLI) check examples/*.xpk && echo "examples: all kernels check"
	@mkdir -p $(BUILD)/demo
	@for t in spirv ptx:sm_90 cpu; do \
	  for k in "reduce.xpk block_sum T=f32" "matmul.xpk matmul_tiled T=f64" \
	           "sort.xpk bitonic_sort_block T=i32"; do \
	    set -- $$k; out=$(BUILD)/demo/$$2.$$(echo $$t | tr : _); \
	    $(CLI) emit examples/$$1 --kernel $$2 --dtype $$3 --target $$t -o $$out \
	      || exit 1; \
	    printf '%-20s %-10s %7d bytes  %s\n' $$2 $$t $$(wc -c < $$out) $$out; \
	  done; done
	$(CLI) emit examples/reduce.xpk --kernel block_sum --dtype T=f32 \
	  --target spirv --emit asm | grep -E 'OpControlBarrier|OpAtomic|OpVariable.*Workgroup'

install: all
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIB_SO_V) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libxpjit.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libxpjit.so.0
	ln -sf libxpjit.so.0 $(DESTDIR)$(PREFIX)/lib/libxpjit.so
	install -m 755 $(LLVM_SO) $(DESTDIR)$(PREFIX)/lib/libxpjit-llvm.so.0
	install -m 755 $(SPIRV_SO) $(DESTDIR)$(PREFIX)/lib/libxpjit-spirv.so.0
	install -m 644 include/*.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' tools/xpjit.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/xpjit.pc
	install -d $(DESTDIR)$(PREFIX)/lib/cmake/xpjit
	for f in xpjitConfig xpjitConfigVersion; do \
	  sed -e 's|@VERSION@|$(VERSION)|g' tools/cmake/$$f.cmake.in \
	    > $(DESTDIR)$(PREFIX)/lib/cmake/xpjit/$$f.cmake || exit 1; done
	install -m 755 $(CLI) $(DAEMON) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/libexec/xpjit
	install -m 755 $(CSERVER) $(DESTDIR)$(PREFIX)/libexec/xpjit/
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 644 tools/completion/xpjit-cli.bash \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/xpjit-cli
	for m in $(MANS); do s=$${m##*.}; \
	  install -d $(DESTDIR)$(PREFIX)/share/man/man$$s && \
	  install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/ || exit 1; done
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/user
	install -m 644 tools/systemd/xpjitd.socket $(DESTDIR)$(PREFIX)/lib/systemd/user/
	sed -e 's|@PREFIX@|$(PREFIX)|g' tools/systemd/xpjitd.service.in \
	  > $(DESTDIR)$(PREFIX)/lib/systemd/user/xpjitd.service

format:
	clang-format -i include/*.h ir/*.[ch] compiler/*.[ch] compiler/*.cpp tools/*.c tests/*.[ch] tests/fuzz/*.c

clean:
	rm -rf build build-asan build-fuzz python/xpjit/_fast*.so

# The MPI example (docs/cluster.md): needs Open MPI's mpicc (libopenmpi-dev).
MPICC ?= mpicc
mpi-example: $(BUILD)/examples/mpi/ranks
$(BUILD)/examples/mpi/ranks: examples/mpi/ranks.c $(LIB_A) include/xpjit.h
	@mkdir -p $(dir $@)
	$(MPICC) $(CSTD) $(WARN) $(OPT) $(SAN) -Iinclude -o $@ $< $(LIB_A) $(CORE_LIBS)
