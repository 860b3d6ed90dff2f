# Makefile: builds build/libnvlprof.so (the shim) and build/nvlprof (the analyzer); runs tests and benchmarks.
#   make            build          make test     CPU tests (no GPU needed)
#   make bench      benchmarks     make DEBUG=1  -O0 build      make SAN=address|undefined|thread
#   make bench-scale  report at 1,024 to 16,384 synthetic ranks (docs/SCALE.md)
#   make deps       install missing Debian build dependencies (as root) or print the command
#   make analyzer   build/nvlprof alone (needs no CUDA toolkit)    make install PREFIX=/usr/local
#   make fuzz       libFuzzer over the reader and every analyzer command (clang; FUZZ_SECONDS=60)
#   make mutate     mutation testing of the suites (tests/mutate/)   make regen-goldens  rewrite goldens
#   make docs-pictures  docs/report_ddp_p2p_disable.png from the current build (headless chromium)
#   make demo       report and diff of the real traces in examples/traces (no GPU, no CUDA toolkit)
#   make examples / gpu-probes   the CUDA examples and GPU probes (nvcc)    docs/COMMANDS.md lists them all
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda /usr/local/cuda-13.0 /opt/cuda) /usr/local/cuda)
NCCL_HOME ?=
PREFIX ?= /usr/local
CC ?= gcc
CXX ?= g++
ifeq ($(CC),cc)
CC := gcc
endif

BUILD := build
OPT := -O2
ifeq ($(DEBUG),1)
OPT := -O0 -g3
endif
SANFLAGS :=
ifneq ($(SAN),)
BUILD := build/san-$(SAN)
SANFLAGS := -fsanitize=$(SAN) -fno-omit-frame-pointer
endif

# ---- headers of the CUDA runtime, CUPTI and NCCL: the shim and its tests need them, the analyzer
# does not. Looked for where toolkits, runfile installs, libnccl-dev and pip put them.
hdr_dir = $(patsubst %/$(1),%,$(firstword $(wildcard $(addsuffix /$(1),$(2)))))
# pip's nvidia-nccl-cu* wheels (system, user and venv site-packages); asked only if needed
PY_SITES = $(shell python3 -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
CUDA_INC := $(call hdr_dir,cuda_runtime_api.h,$(CUDA_HOME)/include)
CUPTI_INC := $(call hdr_dir,cupti.h,$(CUDA_HOME)/include $(CUDA_HOME)/extras/CUPTI/include)
NCCL_INC := $(or $(call hdr_dir,nccl.h,$(if $(NCCL_HOME),$(NCCL_HOME)/include) $(CUDA_HOME)/include /usr/include),$(call hdr_dir,nccl.h,$(addsuffix /nvidia/nccl/include,$(PY_SITES))))
HDR_MISSING := $(if $(CUDA_INC),,cuda_runtime_api.h (in $(CUDA_HOME)/include)) \
  $(if $(CUPTI_INC),,cupti.h (in $(CUDA_HOME)/include or $(CUDA_HOME)/extras/CUPTI/include)) \
  $(if $(NCCL_INC),,nccl.h (in $(if $(NCCL_HOME),$(NCCL_HOME)/include, )$(CUDA_HOME)/include, /usr/include or pip's nvidia/nccl/include))
HDR_MISSING := $(strip $(HDR_MISSING))
uniq = $(if $(1),$(firstword $(1)) $(call uniq,$(filter-out $(firstword $(1)),$(1))))
CUDA_CPPFLAGS := $(addprefix -I,$(call uniq,$(filter-out /usr/include,$(CUDA_INC) $(CUPTI_INC) $(NCCL_INC))))

CPPFLAGS := -D_GNU_SOURCE $(CUDA_CPPFLAGS) -Itrace -Ipreload -Icupti -Ianalyzer
WARN := -Wall -Wextra -Wno-missing-field-initializers
CFLAGS := -std=gnu11 $(OPT) -g $(WARN) -fPIC -pthread $(SANFLAGS)
CXXFLAGS := -std=gnu++17 $(OPT) -g $(WARN) -fPIC -pthread -fno-exceptions -fno-rtti $(SANFLAGS)
LIB_CFLAGS := -fvisibility=hidden
# zstd is linked statically and hidden: no clash with the job's own libzstd, no run-time dependency.
ZSTD_LIB := -Wl,-Bstatic -lzstd -Wl,-Bdynamic
LIB_LDFLAGS := -shared -Wl,--no-undefined -Wl,--exclude-libs,ALL -Wl,-z,nodelete $(SANFLAGS)
LIB_LDLIBS := $(ZSTD_LIB) -ldl -lpthread
# libsqlite3 likewise, into the analyzer only (the SQLite export; why static: docs/EXPORTS.md)
SQLITE_LIB := -Wl,-Bstatic -lsqlite3 -Wl,-Bdynamic
CLI_LDLIBS := $(ZSTD_LIB) $(SQLITE_LIB) -lpthread -lm -ldl -lstdc++ # __cxa_demangle (symbols.c), the CLI only

TRACE_SRCS := $(wildcard trace/*.c)
PRELOAD_SRCS := $(wildcard preload/*.c)
CUPTI_SRCS := $(wildcard cupti/*.c)
CUPTI_CXX_SRCS := $(wildcard cupti/*.cc)
ANALYZER_SRCS := $(filter-out analyzer/cli/main.c,$(wildcard analyzer/*/*.c)) analyzer/pipeline.c

LIB_OBJS := $(patsubst %.c,$(BUILD)/lib/%.o,$(TRACE_SRCS) $(PRELOAD_SRCS) $(CUPTI_SRCS)) \
            $(patsubst %.cc,$(BUILD)/lib/%.o,$(CUPTI_CXX_SRCS))
TRACE_OBJS := $(patsubst %.c,$(BUILD)/cli/%.o,$(TRACE_SRCS))
ANALYZER_OBJS := $(patsubst %.c,$(BUILD)/cli/%.o,$(ANALYZER_SRCS))

LIB := $(BUILD)/libnvlprof.so
CLI := $(BUILD)/nvlprof
DASK := $(BUILD)/nvlprof-dask # `nvlprof dask`: the Python driver, beside the CLI

.PHONY: all analyzer deps test bench bench-scale clean format install regen-goldens test-deps mutate
all: $(LIB) $(CLI) $(DASK)
analyzer: $(CLI) $(DASK)

# ---- build dependencies --------------------------------------------------------------------
# Checked (and installed, as root) while the Makefile is read, so before any compile of any -j
# build. The analyzer needs libzstd-dev and libsqlite3-dev; the shim libzstd-dev, libunwind-dev and
# the CUDA headers.
NO_BUILD_GOALS := clean format help
CLI_GOALS := analyzer demo fuzz fuzz-build fuzz-pack $(CLI)
GOALS := $(or $(MAKECMDGOALS),all)
DEB_DEPS := libzstd-dev:zstd.h libsqlite3-dev:sqlite3.h $(if $(filter-out $(CLI_GOALS),$(GOALS)),libunwind-dev:libunwind.h)
# the tools the export and page tests run (package:command), installed for the goals that test
TEST_GOALS := test regen-goldens mutate docs-pictures
TOOL_DEPS := $(if $(filter $(TEST_GOALS),$(GOALS)),sqlite3:sqlite3 protobuf-compiler:protoc chromium:chromium python3:python3 python3-distributed:dask-scheduler)
define DEPS_SCRIPT
missing=""; for d in $(DEB_DEPS); do pkg=$${d%%:*}; h=$${d##*:}; \
  echo "#include <$$h>" | $(CC) -E -x c - >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
for d in $(TOOL_DEPS); do command -v $${d##*:} >/dev/null 2>&1 || missing="$$missing $${d%%:*}"; done; \
if [ -z "$$missing" ]; then echo ok; \
elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
  echo "nvlprof: installing$$missing" >&2; \
  if DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null 2>&1 || \
     { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null 2>&1; }; \
  then echo ok; else echo "apt-get install$$missing failed"; fi; \
else echo "missing build dependencies; run: sudo apt-get install -y$$missing"; fi
endef
ifneq ($(filter-out $(NO_BUILD_GOALS),$(GOALS)),)
ifneq ($(filter-out $(CLI_GOALS) deps deps-check,$(GOALS)),)
ifneq ($(HDR_MISSING),)
$(error nvlprof: the shim ($(LIB)) needs headers not found: $(HDR_MISSING); set CUDA_HOME or NCCL_HOME (the analyzer alone needs none of them: make analyzer))
endif
endif
DEPS_STATUS := $(shell $(DEPS_SCRIPT))
ifneq ($(DEPS_STATUS),ok)
$(error nvlprof: $(DEPS_STATUS))
endif
endif
.PHONY: deps-check
deps-check:
	@echo "nvlprof: build dependencies present; headers: CUDA $(or $(CUDA_INC),-) CUPTI $(or $(CUPTI_INC),-) NCCL $(or $(NCCL_INC),-)"
deps: deps-check

# ---- compiling: three rules. Each object's header dependencies are written by the compiler
# (-MMD -MP: $(BUILD)/.../x.d beside x.o, included at the end of this file), so touching a header
# rebuilds only what includes it. $(BUILD)/lib: the shim's objects; $(BUILD)/cli: the analyzer's,
# and every test, bench and tool program's own object (tests/... get -Itests).
DEPFLAGS := -MMD -MP
$(BUILD)/lib/%.o: %.c $(BUILD)/lib/%.d
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LIB_CFLAGS) -DNVLP_IN_SHIM=1 $(DEPFLAGS) -c $< -o $@
$(BUILD)/lib/%.o: %.cc $(BUILD)/lib/%.d
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(LIB_CFLAGS) -DNVLP_IN_SHIM=1 $(DEPFLAGS) -c $< -o $@
$(BUILD)/cli/%.o: %.c $(BUILD)/cli/%.d
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(DEPFLAGS) -c $< -o $@
$(BUILD)/cli/tests/%.o: CPPFLAGS += -Itests

# objects made on the way to a program are kept (make would delete them as intermediate)
.PRECIOUS: $(BUILD)/lib/%.o $(BUILD)/cli/%.o $(BUILD)/%.d
# An object is rebuilt when its .d is missing (built by a Makefile that wrote none, or the .d
# deleted), not only when a header it lists changed: each object depends on its .d, and the .d
# of every object a goal names is a target of its own with no recipe (so a missing one counts as
# remade); the .d of any other object comes from the pattern rule below.
DEP_FILES := $(patsubst %.o,%.d,$(LIB_OBJS) $(TRACE_OBJS) $(ANALYZER_OBJS) $(BUILD)/cli/analyzer/cli/main.o)
$(DEP_FILES):
$(BUILD)/%.d: ;

# ---- linking: every program (the CLI, tests, benchmarks, tools) is linked by this one function:
# the .o files among its prerequisites (others, such as a fake library, only order the build),
# then $(1) (libraries: pass a variable, since a comma in $(call) splits arguments), then the
# CLI's libraries.
define link
@mkdir -p $(dir $@)
$(CC) $(SANFLAGS) -pthread -o $@ $(filter %.o,$^) $(1) $(CLI_LDLIBS)
endef

$(LIB): $(LIB_OBJS) preload/exports.map
	$(CC) $(LIB_LDFLAGS) -Wl,--version-script=preload/exports.map -o $@ $(LIB_OBJS) $(LIB_LDLIBS)
$(CLI): $(BUILD)/cli/analyzer/cli/main.o $(ANALYZER_OBJS) $(TRACE_OBJS)
	$(call link)
$(DASK): analyzer/cli/nvlprof_dask.py
	@mkdir -p $(dir $@)
	install -m 755 $< $@

# ---- tests (no GPU) ---------------------------------------------------------------------------
# tests/unit/test_*.c: linked with the trace and analyzer objects (no main) -> $(BUILD)/tests/
# tests/progs/*.c: helper programs for shell tests -> $(BUILD)/tests/progs/ (PROG_LIBS_<name> adds libs)
# tests/fakes/*.c: fake cudart / NCCL / CUPTI libraries -> $(BUILD)/fakes/ (rules below)
# tests/*/test_*.sh: shell tests. tests/run.sh runs them all and prints "N passed, N failed, N skipped".
# A program that needs other objects or libraries gets a rule of its own below ending in $(call link,LIBS).
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
PROG_SRCS := $(wildcard tests/progs/*.c)
PROG_BINS := $(patsubst tests/progs/%.c,$(BUILD)/tests/progs/%,$(PROG_SRCS))
FAKES_DIR := $(BUILD)/fakes
TEST_CFLAGS := $(CPPFLAGS) -Itests $(CFLAGS)

FAKES_LD := -L$(FAKES_DIR) -Wl,-rpath,$(abspath $(FAKES_DIR))

$(BUILD)/tests/test_%: $(BUILD)/cli/tests/unit/test_%.o $(ANALYZER_OBJS) $(TRACE_OBJS)
	$(call link)
$(BUILD)/tests/progs/%: $(BUILD)/cli/tests/progs/%.o $(TRACE_OBJS) | fakes
	$(call link,$(FAKES_LD) $(PROG_LIBS_$*))

# ---- section: fakes (owned by the capture-core tests) ----
# libnccl.so.2 links the fake cudart (the real one links cudart statically; the fake needs the
# current device). Both carry the real sonames so programs and the shim find them as they would.
FAKE_LIBS := $(FAKES_DIR)/libcudart.so.13 $(FAKES_DIR)/libnccl.so.2
.PHONY: fakes
fakes: $(FAKE_LIBS)
$(FAKES_DIR)/libcudart.so.13: tests/fakes/fake_cudart.c tests/fakes/cudart.map tests/fakes/fake.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -shared -Wl,-soname,libcudart.so.13 -Wl,--version-script=tests/fakes/cudart.map -o $@ $<
FAKE_NCCL_SRCS := tests/fakes/fake_nccl.c tests/fakes/fake_nccl_prof.c
$(FAKES_DIR)/libnccl.so.2: $(FAKE_NCCL_SRCS) tests/fakes/fake_nccl_int.h tests/fakes/fake.h $(FAKES_DIR)/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -shared -Wl,-soname,libnccl.so.2 -o $@ $(FAKE_NCCL_SRCS) -L$(FAKES_DIR) -l:libcudart.so.13 -Wl,-rpath,'$$ORIGIN' -ldl
# The same fakes as CUDA 12 and NCCL 2.18 (no profiler plugin, none of the later functions), in
# their own directories so that only the tests that ask for them (LD_LIBRARY_PATH) get them.
FAKE_OLD_LIBS := $(FAKES_DIR)/cuda12/libcudart.so.12 $(FAKES_DIR)/nccl218/libnccl.so.2
fakes: $(FAKE_OLD_LIBS)
$(FAKES_DIR)/cuda12/libcudart.so.12: tests/fakes/fake_cudart.c tests/fakes/cudart12.map tests/fakes/fake.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DFAKE_CUDART_MAJOR=12 -shared -Wl,-soname,libcudart.so.12 -Wl,--version-script=tests/fakes/cudart12.map -o $@ $<
$(FAKES_DIR)/nccl218/libnccl.so.2: $(FAKE_NCCL_SRCS) tests/fakes/fake_nccl_int.h tests/fakes/nccl218.map tests/fakes/fake.h $(FAKES_DIR)/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DFAKE_NCCL_2_18 -shared -Wl,-soname,libnccl.so.2 -Wl,--version-script=tests/fakes/nccl218.map -o $@ $(FAKE_NCCL_SRCS) -L$(FAKES_DIR) -l:libcudart.so.13 -Wl,-rpath,'$$ORIGIN/..' -ldl
# NVML for the link sampler's fallback, in its own directory (only the tests that ask get it).
fakes: $(FAKES_DIR)/nvml/libnvidia-ml.so.1
$(FAKES_DIR)/nvml/libnvidia-ml.so.1: tests/fakes/fake_nvml.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -shared -Wl,-soname,libnvidia-ml.so.1 -o $@ $<
# A second NCCL profiler plugin that logs what it is given (v5; v4 only; a v2 table; no table).
FAKE_PROF_LIBS := $(addprefix $(FAKES_DIR)/prof/libnccl-profiler-,fakelog.so fakelog4.so fakelog2.so empty.so)
FAKE_PROF_DEF_fakelog4 := -DFAKE_PROF_V4
FAKE_PROF_DEF_fakelog2 := -DFAKE_PROF_V2
FAKE_PROF_DEF_empty := -DFAKE_PROF_NONE
fakes: $(FAKE_PROF_LIBS)
$(FAKES_DIR)/prof/libnccl-profiler-%.so: tests/fakes/fake_profiler.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(FAKE_PROF_DEF_$*) -shared -o $@ $<
# A stand-in for libtorch_cuda.so, which the hooks' tests dlopen with RTLD_LOCAL.
$(FAKES_DIR)/libhk_workload.so: tests/fakes/workload.c $(FAKE_LIBS)
	$(CC) $(CPPFLAGS) $(CFLAGS) -shared -o $@ $< -L$(FAKES_DIR) -l:libnccl.so.2 -l:libcudart.so.13 -Wl,-rpath,'$$ORIGIN'
# ---- end section: fakes ----

# ---- section: preload test programs (PROG_LIBS_<name>, extra rules) ----
PROG_LIBS_hk_nccl := -l:libnccl.so.2 -l:libcudart.so.13
PROG_LIBS_hk_cuda := -l:libcudart.so.13
PROG_LIBS_hk_nvtx := -l:libnccl.so.2 -l:libcudart.so.13 -ldl
$(BUILD)/tests/progs/hk_dlopen: $(FAKES_DIR)/libhk_workload.so
BENCH_LIBS_bench_shim := -l:libnccl.so.2
BENCH_LIBS_bench_rate := -l:libnccl.so.2
# bench_drv: the fake libcuda/libcupti (driver callbacks) under the shim
BENCH_LIBS_bench_drv := -L$(BUILD)/fakes/cupti -Wl,-rpath,$(abspath $(BUILD)/fakes/cupti) -Wl,--no-as-needed -l:libcupti.so.13 -Wl,--as-needed -l:libcuda.so.1
$(BUILD)/bench/bench_drv: $(BUILD)/fakes/cupti/libcupti.so.13 $(BUILD)/fakes/cupti/libcuda.so.1
# runtime: rt_app drives the fake NCCL (through the preloaded shim); rt_read only reads traces.
PROG_LIBS_rt_app := -l:libnccl.so.2 -l:libcudart.so.13
PROG_LIBS_chain_app := -l:libnccl.so.2 -l:libcudart.so.13
# pm_job: the post-mortem catalog's job (tests/analyzer/test_postmortem.sh)
PROG_LIBS_pm_job := -l:libnccl.so.2 -l:libcudart.so.13
# the same with CUPTI in the process (the fake libcuda and libcupti, loaded whether used or not)
PROG_LIBS_pm_job_cupti = -l:libnccl.so.2 -l:libcudart.so.13 -L$(CUPTI_FAKES) -Wl,--no-as-needed \
	-l:libcupti.so.13 -l:libcuda.so.1 -Wl,--as-needed -Wl,-rpath,$(abspath $(CUPTI_FAKES))
$(BUILD)/tests/progs/pm_job_cupti: | $(CUPTI_FAKE_LIBS)
# no CUDA runtime at all: the fake libcuda and libcupti only (test_cupti_detach)
PROG_LIBS_drv_only = -L$(CUPTI_FAKES) -l:libcupti.so.13 -l:libcuda.so.1 -Wl,-rpath,$(abspath $(CUPTI_FAKES))
# the clock behind nvlp_now(): linked straight in (it needs nothing else of the shim)
$(BUILD)/tests/test_clock: $(BUILD)/cli/tests/unit/test_clock.o $(BUILD)/cli/preload/nvlp_clock.o
	$(call link)
# ---- end section: preload test programs ----

# ---- section: cupti tests ----
# The fake libcupti.so.13 / libcuda.so.1 live in their own directory so that programs of other
# tests (rpath to $(FAKES_DIR), the shim looking next to libcudart) never pick them up.
CUPTI_FAKES := $(FAKES_DIR)/cupti
CUPTI_FAKE_LIBS := $(CUPTI_FAKES)/libcupti.so.13 $(CUPTI_FAKES)/libcuda.so.1 $(CUPTI_FAKES)/libnvperf_host.so
$(CUPTI_FAKES)/libcupti.so.13: tests/fakes/fake_cupti.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -shared -Wl,-soname,libcupti.so.13 -o $@ $<
$(CUPTI_FAKES)/libcuda.so.1: tests/fakes/fake_cupti.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DFAKE_LIBCUDA -shared -Wl,-soname,libcuda.so.1 -o $@ $< -ldl
# the same fake as CUDA 12's libcupti.so.12 (records of the shared layouts; FAKE_CUPTI_VERSION=22
# makes it report 12.4's API version), in its own directory
CUPTI_FAKE_LIBS += $(CUPTI_FAKES)/12/libcupti.so.12
fakes: $(CUPTI_FAKES)/12/libcupti.so.12 $(CUPTI_FAKES)/libcuda.so.1
$(CUPTI_FAKES)/12/libcupti.so.12: tests/fakes/fake_cupti.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -shared -Wl,-soname,libcupti.so.12 -o $@ $<
# the profiler-host half, dlopen'ed by the fake libcupti as CUPTI does (C++: its params header is)
$(CUPTI_FAKES)/libnvperf_host.so: tests/fakes/fake_cupti.c
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -x c++ -DFAKE_NVPERF -shared -Wl,-soname,libnvperf_host.so -o $@ $<
# conversion of synthetic CUDA 13.0 records: convert.c is pure, linked straight in
$(BUILD)/tests/test_cupti_convert: $(BUILD)/cli/tests/unit/test_cupti_convert.o $(BUILD)/cli/cupti/convert.o
	$(call link)
# GH100 PM-sampling config image built on the host by the real libcupti (dlopen'ed, no GPU)
$(BUILD)/cli/tests/unit/test_cupti_gh100.o $(BUILD)/cli/tests/unit/test_cupti_nodriver.o: CPPFLAGS += -DNVLP_CUDA_HOME='"$(CUDA_HOME)"'
$(BUILD)/tests/test_cupti_gh100: $(BUILD)/cli/tests/unit/test_cupti_gh100.o $(BUILD)/lib/cupti/pm_host.o
	$(call link)
# the shim on the fake libcupti/libcuda (each re-runs itself under LD_PRELOAD): kineto: a Kineto
# stand-in; drv: driver-level capture (a driver-only "static runtime" program, a runtime one, Kineto
# subscribing beside us); exit: slow PM setup, exit before / during / after it; flush: activity
# reaches the trace from full buffers, forced flushes, exit; window: NVLPROF_KERNELS windows turn
# kernel activity off and on
# detach: NVLPROF_CUPTI=startup (cuptiFinalize from a callback, what keeps CUPTI attached)
CUPTI_SHIM_TESTS := $(addprefix $(BUILD)/tests/test_cupti_,kineto drv exit flush window detach)
CUPTI_FAKES_LD := -L$(CUPTI_FAKES) -L$(FAKES_DIR) -l:libcupti.so.13 -l:libcuda.so.1 -l:libcudart.so.13 -Wl,-rpath,$(abspath $(CUPTI_FAKES)):$(abspath $(FAKES_DIR))
LIBS_test_cupti_window := -l:libnccl.so.2
$(CUPTI_SHIM_TESTS): $(BUILD)/tests/%: $(BUILD)/cli/tests/unit/%.o $(TRACE_OBJS) | $(CUPTI_FAKE_LIBS) $(FAKE_LIBS) $(FAKES_DIR)/nvml/libnvidia-ml.so.1 $(BUILD)/tests/progs/drv_only $(LIB)
	$(call link,$(CUPTI_FAKES_LD) $(LIBS_$*))
$(BUILD)/tests/progs/drv_only: | $(CUPTI_FAKE_LIBS)
# the shim on the fake libcupti refusing PM sampling (busy): NVML's counters instead, and the
# report says so
$(BUILD)/tests/test_pm_busy: $(BUILD)/cli/tests/unit/test_pm_busy.o $(TRACE_OBJS) | $(CUPTI_FAKE_LIBS) $(FAKE_LIBS) $(FAKES_DIR)/nvml/libnvidia-ml.so.1 $(LIB)
	$(call link,$(CUPTI_FAKES_LD))
# without CUPTI: DEVICE and NVLINK records from the fake libcuda and the fake NVML's link state
$(BUILD)/tests/test_topo_nvml: $(BUILD)/cli/tests/unit/test_topo_nvml.o $(TRACE_OBJS) | $(CUPTI_FAKE_LIBS) $(FAKE_LIBS) $(FAKES_DIR)/nvml/libnvidia-ml.so.1 $(LIB)
	$(call link,$(CUPTI_FAKES_LD) -ldl)
# two ranks of the fake NCCL under the shim with KernelCh events; the analyzer gives every collective its GPU time
LIBS_test_kernelch := -L$(FAKES_DIR) -l:libnccl.so.2 -l:libcudart.so.13 -Wl,-rpath,$(abspath $(FAKES_DIR))
$(BUILD)/tests/test_kernelch: $(BUILD)/cli/tests/unit/test_kernelch.o $(ANALYZER_OBJS) $(TRACE_OBJS) | $(FAKE_LIBS) $(LIB)
	$(call link,$(LIBS_test_kernelch))
# shim with the REAL libcupti and no driver / the stub libcuda
LIBS_test_cupti_nodriver := -L$(CUDA_HOME)/lib64 -L$(FAKES_DIR) -Wl,--no-as-needed -l:libcupti.so.13 -Wl,--as-needed -l:libcudart.so.13 -Wl,-rpath,$(abspath $(FAKES_DIR)):$(CUDA_HOME)/lib64
$(BUILD)/tests/test_cupti_nodriver: $(BUILD)/cli/tests/unit/test_cupti_nodriver.o $(TRACE_OBJS) | $(FAKES_DIR)/libcudart.so.13 $(LIB)
	$(call link,$(LIBS_test_cupti_nodriver))
# ---- end section: cupti tests ----

# ---- section: analyzer tests ----
# an_gen (synthetic job traces) needs only the trace objects, not the fakes; it resolves its own
# symbols offline in the uma_thrashing test, so it keeps its symbol table (-g, no strip).
$(BUILD)/tests/progs/an_gen: $(BUILD)/cli/tests/progs/an_gen.o $(TRACE_OBJS)
	$(call link)
# bench_report (tests/bench) compiles an_gen.c in and links as every benchmark does
.PHONY: analyzer-test
analyzer-test: $(CLI) $(BUILD)/tests/progs/an_gen $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_analyzer*.c))
	@for t in $(BUILD)/tests/test_analyzer*; do $$t; done; for t in tests/analyzer/test_*.sh; do BUILD=$(BUILD) bash $$t; done
# ---- end section: analyzer tests ----

TEST_DEPS := all $(UNIT_BINS) $(PROG_BINS) fakes $(BUILD)/gpu/cupti_presence.so $(BUILD)/gpu/um_attach
test: $(TEST_DEPS)
	@BUILD=$(BUILD) SAN=$(SAN) CC=$(CC) bash tests/run.sh
# what every suite needs, built (tests/mutate/run.sh rebuilds a mutant with it)
test-deps: $(TEST_DEPS)
# mutation testing on a copy of the tree (tests/mutate/): minutes, not part of `make test`;
# its last result is in docs/TESTING.md. make mutate MUTATE_IDS="id ..." runs some of them.
mutate: $(TEST_DEPS)
	@BUILD=$(BUILD) bash tests/mutate/run.sh $(MUTATE_IDS)
# the suites that compare with goldens, run with --regen-goldens: they write what they produce over
# the committed goldens (review the diff); no environment variable does this
GOLDEN_SUITES := tests/analyzer/test_report.sh tests/analyzer/test_pyloc.sh tests/export/test_export.sh \
	tests/export/test_sqlite.sh tests/hooks/test_graphs12.sh tests/trace/test_format.sh
# the README's picture, from the current build: the HTML report of ddp_p2p_disable in headless Chromium
.PHONY: docs-pictures
docs-pictures: $(CLI)
	$(CLI) report --html $(BUILD)/report_ddp_p2p_disable.html examples/traces/ddp_p2p_disable
	chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
	  --disable-sync --no-first-run --hide-scrollbars --user-data-dir=$$(mktemp -d) --window-size=1000,1300 \
	  --screenshot=$(abspath docs/report_ddp_p2p_disable.png) file://$(abspath $(BUILD)/report_ddp_p2p_disable.html)
.PHONY: regen-goldens
regen-goldens: $(TEST_DEPS)
	@for t in $(GOLDEN_SUITES); do BUILD=$(BUILD) bash $$t --regen-goldens | grep '^REGEN: '; done; git status --short -- '*golden*' examples/traces

# ---- benchmarks -------------------------------------------------------------------------------
BENCH_SRCS := $(wildcard tests/bench/*.c)
BENCH_BINS := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))
# benchmarks are compiled -O2 whatever DEBUG says
$(BUILD)/cli/tests/bench/%.o: CFLAGS += -O2
$(BUILD)/bench/%: $(BUILD)/cli/tests/bench/%.o $(ANALYZER_OBJS) $(TRACE_OBJS) | fakes
	$(call link,$(FAKES_LD) $(BENCH_LIBS_$*))
bench: all $(BENCH_BINS)
	@BUILD=$(BUILD) bash tests/bench/run.sh
# report's time and memory on synthetic jobs up to 16,384 ranks (SIZES="..." REPS=N NCCL_ONLY=1;
# docs/SCALE.md): about 4 minutes on 2 cores with the defaults
bench-scale: analyzer $(BUILD)/tests/progs/an_gen
	@BUILD=$(BUILD) bash tests/bench/scale.sh

# bin/nvlprof finds lib/libnvlprof.so from where it is installed (analyzer/cli/run.c)
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib
	install -m 755 $(CLI) $(DESTDIR)$(PREFIX)/bin/nvlprof
	install -m 755 $(DASK) $(DESTDIR)$(PREFIX)/bin/nvlprof-dask
	install -m 755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libnvlprof.so

format:
	clang-format -i $(wildcard */*.c */*.h */*.cc tests/*/*.c)
clean:
	rm -rf build

# ---- fuzzing: libFuzzer over the reader and every analyzer command (tests/fuzz/) -------------------
# The analyzer and trace objects are rebuilt with clang, ASan and UBSan (every UB report aborts);
# seeds are the example traces cut to a few records per kind (mkseed), single ranks and pairs.
# make fuzz FUZZ_SECONDS=N FUZZ_JOBS=N FUZZ_ARGS=...: crashers land in $(FUZZ_DIR)/crashes/.
FUZZ_CC ?= clang
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 1
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# -O2: 592 vs 506 executions per CPU-second for -O1 (one 25 s run each on a loaded machine: noisy)
FUZZ_OPT ?= -O2
FUZZ_CFLAGS := $(filter-out $(SANFLAGS) -fPIC -O%,$(CFLAGS)) $(FUZZ_OPT) -gline-tables-only $(FUZZ_SAN) -fsanitize=fuzzer-no-link
# only libc and libm at run time: the binary runs on machines without sqlite or clang (fuzz-pack)
FUZZ_LDLIBS := $(ZSTD_LIB) $(SQLITE_LIB) -lpthread -lm -ldl -static-libstdc++ -static-libgcc
FUZZ_OBJS := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(ANALYZER_SRCS) $(TRACE_SRCS))
# The mutator's decode and re-encode (codec.c over its own copy of the reader and writer) is built
# without sanitizers or coverage, its copy's symbols made local: it is no code under test, and
# instrumented it took ~20% of the fuzzer's time (perf).
FUZZ_MUT := $(FUZZ_DIR)/mutator.o
FUZZ_MUT_OBJS := $(patsubst %.c,$(FUZZ_DIR)/mut/%.o,$(TRACE_SRCS) tests/fuzz/codec.c)
FUZZ_BIN := $(FUZZ_DIR)/fuzz_trace
ifneq ($(filter fuzz fuzz-build fuzz-pack,$(GOALS)),)
FUZZ_PROBE := $(shell printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' | $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1 && echo ok)
ifneq ($(FUZZ_PROBE),ok)
$(error nvlprof: make fuzz needs clang with libFuzzer ($(FUZZ_CC) -fsanitize=fuzzer does not link; Debian: apt-get install clang libclang-rt-dev; FUZZ_CC= picks another clang))
endif
endif
# No comparison tracing in the analyzer: the values it would feed only reach libFuzzer's byte-level
# mutations, which cannot get past zstd and the CRC to the decoded fields the analyzer compares
# (the structure-aware mutator picks those); the reader keeps it, for the frame bytes.
$(FUZZ_DIR)/obj/analyzer/%.o: FUZZ_CMP := -fno-sanitize-coverage=trace-cmp
$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) -Itests/fuzz $(FUZZ_CFLAGS) $(FUZZ_CMP) $(DEPFLAGS) -c $< -o $@
$(FUZZ_DIR)/mut/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) -Itests/fuzz $(filter-out $(SANFLAGS) -fPIC -O%,$(CFLAGS)) -O2 -DZSTD_LEVEL=1 $(DEPFLAGS) -c $< -o $@
$(FUZZ_MUT): $(FUZZ_MUT_OBJS)
	ld -r -o $@.all $^
	objcopy $(addprefix --keep-global-symbol=fz_,split decode decode_file encode insert delete free) $@.all $@
$(FUZZ_BIN): tests/fuzz/fuzz_trace.c $(FUZZ_OBJS) $(FUZZ_MUT)
	$(FUZZ_CC) $(CPPFLAGS) -Itests/fuzz $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LDLIBS)
$(BUILD)/cli/tests/fuzz/%.o: CPPFLAGS += -Itests/fuzz
$(FUZZ_DIR)/mkseed: $(BUILD)/cli/tests/fuzz/mkseed.o $(BUILD)/cli/tests/fuzz/codec.o $(TRACE_OBJS)
	$(call link)
.PHONY: fuzz fuzz-build fuzz-seeds fuzz-pack
# and a real two-rank job with its kernel channels folded per collective (KCOLL, format 2.1)
KCOLL_SEED_JOB := tests/analyzer/traces/fail2_healthy
fuzz-seeds: $(FUZZ_DIR)/mkseed $(BUILD)/tests/progs/kcoll_fold
	@mkdir -p $(FUZZ_DIR)/seeds $(FUZZ_DIR)/kcoll
	@for d in examples/traces/*/; do n=$$(basename $$d); set -- $$d*.nvlp; \
	  for k in 3 12; do $(FUZZ_DIR)/mkseed $(FUZZ_DIR)/seeds/$$n-$$k $$k $$1 || exit 1; \
	    [ $$# -lt 2 ] || $(FUZZ_DIR)/mkseed $(FUZZ_DIR)/seeds/$$n-pair-$$k $$k $$1 $$2 || exit 1; done; done
	@set -- ; for f in $(KCOLL_SEED_JOB)/*.nvlp; do \
	  $(BUILD)/tests/progs/kcoll_fold $$f $(FUZZ_DIR)/kcoll/$$(basename $$f) || exit 1; \
	  set -- "$$@" $(FUZZ_DIR)/kcoll/$$(basename $$f); done; \
	  for k in 3 12; do $(FUZZ_DIR)/mkseed $(FUZZ_DIR)/seeds/kcoll-$$k $$k $$1 || exit 1; \
	    $(FUZZ_DIR)/mkseed $(FUZZ_DIR)/seeds/kcoll-pair-$$k $$k $$1 $$2 || exit 1; done
fuzz-build: $(FUZZ_BIN) fuzz-seeds
# One process (FUZZ_JOBS=1) stops at the first crash, hang (-timeout), sanitizer report or malloc
# over 64 MiB (memory must stay in proportion to an input of at most 64 KiB), with an error;
# FUZZ_JOBS=N runs libFuzzer's -fork=N instead (add -ignore_crashes=1 -ignore_ooms=1
# -ignore_timeouts=1 to FUZZ_ARGS for a long campaign). malloc_context_size=4 keeps ASan cheap.
FUZZ_MODE = $(if $(filter-out 1,$(FUZZ_JOBS)),-fork=$(FUZZ_JOBS))
fuzz: fuzz-build
	@mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/crashes
	ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=1:malloc_context_size=4} $(FUZZ_BIN) $(FUZZ_MODE) \
	  -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=64 -max_len=65536 \
	  -print_final_stats=1 -artifact_prefix=$(abspath $(FUZZ_DIR)/crashes)/ $(FUZZ_ARGS) \
	  $(FUZZ_DIR)/corpus $(FUZZ_DIR)/seeds
# make fuzz-pack DEST=dir: the binary, seeds, regression inputs and run_many.sh in one folder that
# runs where nothing was built (no clang, no sqlite): any shared library beyond libc's goes to lib/.
fuzz-pack: fuzz-build
	@test -n "$(DEST)" || { echo "usage: make fuzz-pack DEST=dir" >&2; exit 2; }
	@mkdir -p $(DEST)/seeds $(DEST)/regress $(DEST)/lib
	cp $(FUZZ_BIN) tests/fuzz/run_many.sh $(DEST)/
	@{ git describe --always --dirty 2>/dev/null || echo unknown; } >$(DEST)/BUILD # which build a campaign ran
	cp $(FUZZ_DIR)/seeds/* $(DEST)/seeds/
	cp $(filter-out %README,$(wildcard tests/fuzz/regress/*)) $(DEST)/regress/
	@ldd $(FUZZ_BIN) | awk '$$2 == "=>" && $$3 ~ /^\// {print $$3}' | \
	  grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv)\.so' | xargs -r -I{} cp -L {} $(DEST)/lib/
	@rmdir $(DEST)/lib 2>/dev/null || true
	@echo "fuzz-pack: $(DEST): run $(DEST)/run_many.sh -j JOBS -t SECONDS -o OUT"

# ---- CUDA examples (need nvcc; shared cudart so that the shim sees their runtime calls) ----------
NVCC ?= $(CUDA_HOME)/bin/nvcc
EXAMPLES := $(BUILD)/examples/p2p_copy $(BUILD)/examples/uma_thrash $(BUILD)/examples/launch_cost
.PHONY: examples
examples: $(EXAMPLES)
# every CUDA program is built by this one function; $(1): extra libraries and linker options
define nvcc_link
@mkdir -p $(dir $@)
$(NVCC) -O2 -arch=sm_90 -cudart shared -o $@ $< $(1)
endef
NVCC_RPATH := -Xlinker -rpath,$(CUDA_HOME)/lib64
$(BUILD)/examples/%: examples/%.cu
	$(call nvcc_link,$(NVCC_RPATH))
# a GPU benchmark of the proof scripts (tests/gpu/), built with the examples
$(BUILD)/examples/launch_cost: tests/gpu/launch_cost.cu
	$(call nvcc_link,$(NVCC_RPATH))

# the host-side probes for tests/gpu/run_overhead.sh (nvcc; coll_cost links NCCL, cupti_phases CUPTI)
GPU_PROBES := $(BUILD)/gpu/launch_cost $(BUILD)/gpu/coll_cost $(BUILD)/gpu/cupti_phases $(BUILD)/gpu/cupti_parts \
	$(BUILD)/gpu/mtprof.so $(BUILD)/gpu/cupti_presence.so $(BUILD)/gpu/um_attach
NVCC_LIBS_coll_cost := -lnccl
NVCC_LIBS_cupti_phases := -lcupti
NVCC_LIBS_cupti_parts := -lcupti
.PHONY: gpu-probes
gpu-probes: $(GPU_PROBES)
$(BUILD)/gpu/%: tests/gpu/%.cu
	$(call nvcc_link,$(NVCC_LIBS_$*))
# the main thread's CPU by shared object, for run_cost.sh's MTPROF=1 (the GPU machine has no perf)
$(BUILD)/gpu/mtprof.so: tests/gpu/mtprof.c
	@mkdir -p $(@D)
	$(CC) -O2 -Wall -Wextra -shared -fPIC -o $@ $< -lrt
# CUPTI's parts alone, without nvlprof (overhead.py's NAME=cupti:PARTS); libcupti is dlopened
$(BUILD)/gpu/cupti_presence.so: tests/gpu/cupti_presence.c
	@mkdir -p $(@D)
	$(CC) -O2 -Wall -Wextra -shared -fPIC -pthread $(CUDA_CPPFLAGS) -o $@ $< -ldl
# when CUPTI must attach to count managed memory's migrations (plan_lazy.sh probe); libcuda and libcupti dlopened
$(BUILD)/gpu/um_attach: tests/gpu/um_attach.c
	@mkdir -p $(@D)
	$(CC) -O2 -Wall -Wextra $(CUDA_CPPFLAGS) -o $@ $< -ldl

# ---- demo: the README's first command (real traces recorded on 2 x H200, no GPU needed) ---------
.PHONY: demo
demo: $(CLI)
	@for d in examples/traces/*/; do echo "### nvlprof report $$d"; $(CLI) report $$d 2>/dev/null; echo; done
	@echo "### nvlprof diff examples/traces/ddp_healthy examples/traces/ddp_p2p_disable"
	@$(CLI) diff examples/traces/ddp_healthy examples/traces/ddp_p2p_disable 2>/dev/null

# ---- the compiler's header dependencies of every object built so far (see DEPFLAGS) ----
-include $(wildcard $(addprefix $(BUILD)/,*/*.d */*/*.d */*/*/*.d */*/*/*/*.d */*/*/*/*/*.d))
