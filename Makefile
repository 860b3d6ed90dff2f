# Makefile: builds build/libnvlprof.so (the shim) and build/nvlprof (the analyzer); runs tests and benchmarks.
#   make            build          make test     CPU tests (no GPU needed)
#   make bench      benchmarks     make DEBUG=1  -O0 build      make SAN=address|undefined|thread
#   make deps       install missing Debian build dependencies (as root) or print the command
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda /usr/local/cuda-13.0 /opt/cuda) /usr/local/cuda)
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

CPPFLAGS := -D_GNU_SOURCE -I$(CUDA_HOME)/include -Itrace -Ipreload -Icupti -Ianalyzer
WARN := -Wall -Wextra -Wno-missing-field-initializers
CFLAGS := -std=gnu11 $(OPT) -g $(WARN) -fPIC -pthread $(SANFLAGS)
CXXFLAGS := -std=gnu++17 $(OPT) -g $(WARN) -fPIC -pthread -fno-exceptions -fno-rtti $(SANFLAGS)
LIB_CFLAGS := -fvisibility=hidden
# zstd is linked statically and hidden: no clash with the job's own libzstd, no run-time dependency.
ZSTD_LIB := -Wl,-Bstatic -lzstd -Wl,-Bdynamic
LIB_LDFLAGS := -shared -Wl,--no-undefined -Wl,--exclude-libs,ALL -Wl,-z,nodelete $(SANFLAGS)
LIB_LDLIBS := $(ZSTD_LIB) -ldl -lpthread
CLI_LDLIBS := $(ZSTD_LIB) -lpthread -lm -ldl

TRACE_SRCS := $(wildcard trace/*.c)
PRELOAD_SRCS := $(wildcard preload/*.c)
CUPTI_SRCS := $(wildcard cupti/*.c)
CUPTI_CXX_SRCS := $(wildcard cupti/*.cc)
ANALYZER_SRCS := $(filter-out analyzer/main.c,$(wildcard analyzer/*.c))

LIB_OBJS := $(patsubst %.c,$(BUILD)/lib/%.o,$(TRACE_SRCS) $(PRELOAD_SRCS) $(CUPTI_SRCS)) \
            $(patsubst %.cc,$(BUILD)/lib/%.o,$(CUPTI_CXX_SRCS))
TRACE_OBJS := $(patsubst %.c,$(BUILD)/cli/%.o,$(TRACE_SRCS))
ANALYZER_OBJS := $(patsubst %.c,$(BUILD)/cli/%.o,$(ANALYZER_SRCS))

LIB := $(BUILD)/libnvlprof.so
CLI := $(BUILD)/nvlprof

.PHONY: all deps test bench clean format
all: deps-check $(LIB) $(CLI)

# ---- build dependencies --------------------------------------------------------------------
DEB_DEPS := libzstd-dev:zstd.h libunwind-dev:libunwind.h
.PHONY: deps-check
deps-check:
	@missing=""; for d in $(DEB_DEPS); do pkg=$${d%%:*}; h=$${d##*:}; \
	  echo "#include <$$h>" | $(CC) -E -x c - >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "nvlprof: installing$$missing"; \
	    (apt-get install -y -q $$missing >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null)) \
	      || { echo "nvlprof: apt-get install$$missing failed"; exit 1; }; \
	  else echo "nvlprof: missing build dependencies; run: sudo apt-get install -y$$missing"; exit 1; fi; fi; \
	test -f $(CUDA_HOME)/include/nccl.h -a -f $(CUDA_HOME)/include/cupti.h || \
	  { echo "nvlprof: CUDA toolkit headers (cupti.h, nccl.h) not found under CUDA_HOME=$(CUDA_HOME); set CUDA_HOME"; exit 1; }
deps: deps-check

$(BUILD)/lib/%.o: %.c $(wildcard trace/*.h preload/*.h cupti/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LIB_CFLAGS) -DNVLP_IN_SHIM=1 -c $< -o $@
$(BUILD)/lib/%.o: %.cc $(wildcard trace/*.h preload/*.h cupti/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(LIB_CFLAGS) -DNVLP_IN_SHIM=1 -c $< -o $@
$(BUILD)/cli/%.o: %.c $(wildcard trace/*.h analyzer/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS) preload/exports.map
	$(CC) $(LIB_LDFLAGS) -Wl,--version-script=preload/exports.map -o $@ $(LIB_OBJS) $(LIB_LDLIBS)
$(CLI): $(BUILD)/cli/analyzer/main.o $(ANALYZER_OBJS) $(TRACE_OBJS)
	$(CC) $(SANFLAGS) -o $@ $^ $(CLI_LDLIBS)

# ---- tests (no GPU) ---------------------------------------------------------------------------
# tests/unit/test_*.c: linked with the trace and analyzer objects (no main) -> $(BUILD)/tests/
# tests/progs/*.c: helper programs for shell tests -> $(BUILD)/tests/progs/ (PROG_LIBS_<name> adds libs)
# tests/fakes/*.c: fake cudart / NCCL / CUPTI libraries -> $(BUILD)/fakes/ (rules below)
# tests/*/test_*.sh: shell tests. tests/run.sh runs them all and prints "N passed, N failed".
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
PROG_SRCS := $(wildcard tests/progs/*.c)
PROG_BINS := $(patsubst tests/progs/%.c,$(BUILD)/tests/progs/%,$(PROG_SRCS))
FAKES_DIR := $(BUILD)/fakes
TEST_CFLAGS := $(CPPFLAGS) -Itests $(CFLAGS)

$(BUILD)/tests/test_%: tests/unit/test_%.c $(ANALYZER_OBJS) $(TRACE_OBJS) $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(ANALYZER_OBJS) $(TRACE_OBJS) $(CLI_LDLIBS)
$(BUILD)/tests/progs/%: tests/progs/%.c $(TRACE_OBJS) fakes
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(TRACE_OBJS) -L$(FAKES_DIR) -Wl,-rpath,$(abspath $(FAKES_DIR)) $(PROG_LIBS_$*) $(CLI_LDLIBS)

# ---- section: fakes (owned by the capture-core tests) ----
FAKE_LIBS := $(FAKES_DIR)/libcudart.so.13 $(FAKES_DIR)/libnccl.so.2
.PHONY: fakes
fakes: $(FAKE_LIBS)
$(FAKES_DIR)/libcudart.so.13: tests/fakes/fake_cudart.c tests/fakes/cudart.map
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -shared -Wl,-soname,libcudart.so.13 -Wl,--version-script=tests/fakes/cudart.map -o $@ $<
$(FAKES_DIR)/libnccl.so.2: tests/fakes/fake_nccl.c $(FAKES_DIR)/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -shared -Wl,-soname,libnccl.so.2 -o $@ $< 
# ---- end section: fakes ----

# ---- section: preload test programs (PROG_LIBS_<name>, extra rules) ----
# ---- end section: preload test programs ----

# ---- section: cupti tests ----
# ---- end section: cupti tests ----

# ---- section: analyzer tests ----
# ---- end section: analyzer tests ----

TEST_DEPS := all $(UNIT_BINS) $(PROG_BINS) fakes
test: $(TEST_DEPS)
	@BUILD=$(BUILD) SAN=$(SAN) CC=$(CC) bash tests/run.sh

# ---- benchmarks -------------------------------------------------------------------------------
BENCH_SRCS := $(wildcard tests/bench/*.c)
BENCH_BINS := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))
$(BUILD)/bench/%: tests/bench/%.c $(ANALYZER_OBJS) $(TRACE_OBJS) fakes
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -O2 -o $@ $< $(ANALYZER_OBJS) $(TRACE_OBJS) -L$(FAKES_DIR) -Wl,-rpath,$(abspath $(FAKES_DIR)) $(BENCH_LIBS_$*) $(CLI_LDLIBS)
bench: all $(BENCH_BINS)
	@BUILD=$(BUILD) bash tests/bench/run.sh

format:
	clang-format -i $(wildcard */*.c */*.h */*.cc tests/*/*.c)
clean:
	rm -rf build
