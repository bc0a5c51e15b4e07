# voxconv — build, test, demo. `make help` lists the targets.
#
# Everything lands in build/ (build-asan/ for the sanitizer build). The CUDA backend is
# compiled when nvcc is on PATH and src/cuda has sources; nothing here needs a GPU.

CC      ?= cc
comma   := ,
BUILD   ?= build
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
WARN    := -std=c11 -Wall -Wextra -Wshadow -Wno-unused-parameter -Werror=implicit-function-declaration
CPPFLAGS_VC := -Iinclude -D_GNU_SOURCE
OPENMP  := -fopenmp
# The OpenMP build of OpenBLAS: its GEMM threads are the same pool as our gather/scatter
# loops. With the pthreads build the two pools spin against each other (5x slower on 2 cores).
BLAS_DIR   = $(shell ls -d /usr/lib/*/openblas-openmp 2>/dev/null | head -n 1)
BLAS_LIBS  = $(if $(BLAS_DIR),-L$(BLAS_DIR) -Wl$(comma)-rpath$(comma)$(BLAS_DIR)) -lopenblas
LIBS     = $(BLAS_LIBS) $(OPENMP) -lm -lpthread

CORE_SRCS := $(wildcard src/core/*.c)
CPU_SRCS  := $(wildcard src/cpu/*.c)
CUDA_SRCS := $(wildcard src/cuda/*.cu src/cuda/hopper/*.cu)
TOOL_SRCS := $(wildcard tools/*.c)
TEST_SRCS := $(wildcard tests/*.c)
GPU_TEST_SRCS := $(wildcard tests/gpu/*.c)

NVCC := $(shell command -v nvcc 2>/dev/null)
ifneq ($(NVCC),)
ifneq ($(CUDA_SRCS),)
HAVE_CUDA := 1
endif
endif

LIB_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(CORE_SRCS) $(CPU_SRCS))
ifdef HAVE_CUDA
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CPPFLAGS_VC += -DVC_HAVE_CUDA -I$(CUDA_HOME)/include
NVCCFLAGS ?= -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=sm_80 -Xcompiler -fPIC
LIB_OBJS += $(patsubst %.cu,$(BUILD)/%.o,$(CUDA_SRCS))
LIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
endif
TOOL_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(TOOL_SRCS))
TEST_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(TEST_SRCS))
# The PLY reader and voxeliser of the command line are tested in the C suite (test_ply.c).
PLY_OBJS  := $(BUILD)/tools/ply.o $(BUILD)/tools/voxelize.o
TEST_OBJS += $(PLY_OBJS)
# The GPU tests reuse the CPU suite's helpers (util.c, dense.c), not its main.
GPU_TEST_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(GPU_TEST_SRCS) tests/util.c tests/dense.c)

.PHONY: all deps test demo asan bench gpu-tests clean help
all: deps $(BUILD)/libvoxconv.a $(BUILD)/libvoxconv.so $(BUILD)/voxconv

help:
	@echo "make           build $(BUILD)/libvoxconv.{a,so} and $(BUILD)/voxconv"
	@echo "make test      build and run the CPU test suite (installs missing packages)"
	@echo "make demo      build and run 'voxconv demo' (a sparse U-Net, checked against the reference)"
	@echo "make asan      the test suite under AddressSanitizer + UndefinedBehaviorSanitizer"
	@echo "make bench     the CPU benchmark (explicit path vs plain OpenBLAS SGEMM)"
	@echo "make fuzz      libFuzzer on the PLY reader and plan creation, FUZZ_SECONDS (60) each (clang)"
	@echo "make sample    regenerate data/shape.ply from tools/gen/make_sample_ply.c"

# Installs what the build needs on a fresh Debian machine (OpenBLAS headers and library).
deps:
	@sh tools/install-deps.sh

# Library objects export only the VC_API functions of the header.
LIB_FLAGS := -fvisibility=hidden -DVC_BUILDING_LIBRARY
$(BUILD)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(OPENMP) -fPIC $(LIB_FLAGS) $(CPPFLAGS_VC) -MMD -MP -c $< -o $@

$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(OPENMP) -Itests $(CPPFLAGS_VC) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(OPENMP) -fPIC $(CPPFLAGS_VC) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -fvisibility=hidden -DVC_BUILDING_LIBRARY $(CPPFLAGS_VC) -MMD -MP -c $< -o $@

$(BUILD)/libvoxconv.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libvoxconv.so: $(LIB_OBJS)
	$(CC) -shared -o $@ $^ $(LIBS)

$(BUILD)/voxconv: $(TOOL_OBJS) $(BUILD)/libvoxconv.a
	$(CC) $(CFLAGS) -o $@ $(TOOL_OBJS) $(BUILD)/libvoxconv.a $(LIBS)

# The README's C example is part of the test suite: extracted, compiled and run.
$(BUILD)/readme_example.c: README.md
	@mkdir -p $(BUILD)
	awk '/^```c$$/{f=1;next} /^```$$/{f=0} f' README.md > $@

$(BUILD)/readme_example: $(BUILD)/readme_example.c $(BUILD)/libvoxconv.a
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS_VC) -o $@ $< $(BUILD)/libvoxconv.a $(LIBS)

$(BUILD)/vc_tests: $(TEST_OBJS) $(BUILD)/libvoxconv.a
	$(CC) $(CFLAGS) -o $@ $(TEST_OBJS) $(BUILD)/libvoxconv.a $(LIBS)

# GPU tests: built here when nvcc is present (CI compiles them), run by tests/gpu/run.sh.
$(BUILD)/vc_gpu_tests: $(GPU_TEST_OBJS) $(BUILD)/libvoxconv.a
	$(CC) $(CFLAGS) -o $@ $(GPU_TEST_OBJS) $(BUILD)/libvoxconv.a $(LIBS)

gpu-tests: all $(if $(HAVE_CUDA),$(BUILD)/vc_gpu_tests)

# PYTHON_TESTS=0 skips the binding's tests (the sanitizer build: Python is not instrumented).
PYTHON_TESTS ?= 1
test: all $(BUILD)/vc_tests $(BUILD)/readme_example $(if $(GPU_TEST_SRCS),gpu-tests)
	@sh tests/run.sh $(BUILD)
	@$(if $(filter 1,$(PYTHON_TESTS)),sh tests/python/run.sh $(BUILD),echo "python tests: skipped")

demo: all
	$(BUILD)/voxconv demo

bench: all
	$(BUILD)/voxconv bench-cpu

asan:
	@$(MAKE) --no-print-directory test BUILD=build-asan OPT=-O1 PYTHON_TESTS=0 \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  LIBS="$(LIBS) -fsanitize=address,undefined"

clean:
	rm -rf build build-asan build-fuzz

# ---- the sample mesh ----------------------------------------------------------------------
# data/shape.ply is committed; `make sample` regenerates it after a change to its generator.
.PHONY: sample
sample: $(BUILD)/make_sample_ply
	$(BUILD)/make_sample_ply data/shape.ply

$(BUILD)/make_sample_ply: tools/gen/make_sample_ply.c
	@mkdir -p $(BUILD)
	$(CC) $(WARN) $(CFLAGS) -o $@ $< -lm

# ---- fuzzing ------------------------------------------------------------------------------
# tests/fuzz/fuzz_NAME.c are libFuzzer targets. `make test` (and `make asan`) replays their
# seed corpus and regression inputs, tests/fuzz/{corpus,regress}/NAME/, through
# $(BUILD)/replay_NAME, built by the normal compiler. `make fuzz` builds them with clang's
# libFuzzer, ASan and UBSan in build-fuzz/ (CPU only: NVCC is emptied, so no VC_HAVE_CUDA;
# no OpenMP, so one thread) and runs each for FUZZ_SECONDS on a scratch copy of the corpus.
# A crash stops it and leaves the input in build-fuzz/crashes/: fix it, then keep the input
# in tests/fuzz/regress/NAME/.
.PHONY: fuzz fuzz-build
FUZZ_NAMES   := ply plan
FUZZ_SECONDS ?= 60
FUZZ_BUILD   := build-fuzz
FUZZ_FLAGS   := -O1 -g -fno-omit-frame-pointer -Wno-unknown-pragmas -fsanitize=address,undefined \
                -fno-sanitize-recover=undefined

# Kept, not deleted as intermediates of the two pattern rules below.
.SECONDARY: $(FUZZ_NAMES:%=$(BUILD)/tests/fuzz/fuzz_%.o) $(BUILD)/tests/fuzz/replay.o

$(BUILD)/replay_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/replay.o $(PLY_OBJS) $(BUILD)/libvoxconv.a
	$(CC) $(CFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libvoxconv.a $(LIBS)

test: $(FUZZ_NAMES:%=$(BUILD)/replay_%)

$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(PLY_OBJS) $(BUILD)/libvoxconv.a
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $(filter %.o,$^) $(BUILD)/libvoxconv.a $(LIBS)

fuzz-build: $(FUZZ_NAMES:%=$(BUILD)/fuzz_%)

fuzz: deps
	@sh tools/install-fuzz-deps.sh
	@$(MAKE) --no-print-directory fuzz-build BUILD=$(FUZZ_BUILD) CC=clang NVCC= OPENMP= \
	  CFLAGS="$(FUZZ_FLAGS) -fsanitize=fuzzer-no-link"
	@sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_NAMES)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
