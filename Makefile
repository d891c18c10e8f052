# gw - one non-recursive Makefile. `make help` lists the targets.
# Objects go to $(O) (default build/$(MODE)); helpers building side by side pass O=.

MODE ?= release
O ?= build/$(MODE)

PKGS := libevent libevent_pthreads libevent_openssl libnghttp2 openssl jansson libcyaml yaml-0.1 lmdb ck \
        zlib libbrotlidec libzstd
CC ?= cc
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wcast-qual \
        -Wwrite-strings -Wpointer-arith -Wformat=2 -Wundef -Wvla
CFLAGS_MODE_release := -O2 -g
CFLAGS_MODE_debug := -O0 -g3
CFLAGS_MODE_asan := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
CFLAGS_MODE_ubsan := -O1 -g -fsanitize=undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
CFLAGS_MODE_tsan := -O1 -g -fsanitize=thread -fno-omit-frame-pointer -DCK_USE_CC_BUILTINS=1
# fuzz: the libFuzzer build (clang, into $(FUZZ_O); tests/module.mk), instrumented for
# coverage; -fno-sanitize-recover turns undefined behaviour into a crash libFuzzer reports.
CFLAGS_MODE_fuzz := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
        -fno-omit-frame-pointer
LDFLAGS_MODE_fuzz := -fsanitize=fuzzer,address,undefined
LDFLAGS_MODE_asan := -fsanitize=address,undefined
LDFLAGS_MODE_ubsan := -fsanitize=undefined
LDFLAGS_MODE_tsan := -fsanitize=thread

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lhttp_parser -lwslay -lpthread
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) -I. -MMD -MP $(CFLAGS_MODE_$(MODE)) $(PKG_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(LDFLAGS_MODE_$(MODE)) $(LDFLAGS)

include core/module.mk dialects/module.mk store/module.mk net/module.mk cli/module.mk \
        bench/module.mk tests/module.mk

.DEFAULT_GOAL := all
.PHONY: all deps run test unit e2e fuzz fuzz-build fuzz-replay bench asan ubsan tsan clean help \
        check-deps fmt check-fmt test-oom image image-test

all: $(O)/bin/gwd $(O)/bin/gwctl $(O)/bin/gwbench bin-links

# bin/ always points at the last build, so docs can say bin/gwd.
bin-links: $(O)/bin/gwd $(O)/bin/gwctl $(O)/bin/gwbench
	@mkdir -p bin
	@for b in gwd gwctl gwbench; do ln -sfn ../$(O)/bin/$$b bin/$$b; done
.PHONY: bin-links

$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(O)/libgwcore.a: $(CORE_OBJ) $(DIALECTS_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(O)/libgwstore.a: $(STORE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(O)/libgwnet.a: $(filter-out $(O)/net/main.o,$(NET_OBJ))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(O)/bin/gwd: $(O)/net/main.o $(O)/libgwnet.a $(O)/libgwstore.a $(O)/libgwcore.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(O)/bin/gwctl: $(CLI_OBJ) $(O)/libgwcore.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(O)/bin/gwbench: $(BENCH_OBJ) $(O)/libgwcore.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

# ---- packages ----
deps:
	@sh tools/deps.sh

# ---- run the demo ----
run: deps all
	@sh tools/run-demo.sh

# ---- tests ----
# The libFuzzer step of `make test` runs each target FUZZ_SECS (10) s, FUZZ_JOBS (one per
# core) at a time; `make fuzz` runs them longer. FUZZ_O holds the clang build: one tree
# for every MODE (its flags do not depend on MODE); helpers building side by side pass
# their own (O=build/x FUZZ_O=build/x-fuzz).
FUZZ_CC ?= clang
FUZZ_O ?= build/fuzz
export FUZZ_O

test: deps
	@$(MAKE) --no-print-directory all unit-bins fuzz-bins
	@$(MAKE) --no-print-directory fuzz-build
	@sh tools/test.sh $(O)

unit: deps
	@$(MAKE) --no-print-directory all unit-bins
	@sh tools/test.sh $(O) unit

e2e: deps
	@$(MAKE) --no-print-directory all
	@sh tools/test.sh $(O) e2e

fuzz-replay: fuzz-bins
	@sh tools/test.sh $(O) fuzz

# The libFuzzer binaries, $(FUZZ_O)/tests/fuzz/fuzz_<target> (incremental).
fuzz-build:
	@$(MAKE) --no-print-directory MODE=fuzz O=$(FUZZ_O) CC=$(FUZZ_CC) fuzz-bins

# Longer runs: FUZZ_SECS=600 make fuzz runs each target 10 minutes (default 60 s).
fuzz: deps fuzz-build
	@FUZZ_SECS=$${FUZZ_SECS:-60} sh tools/test.sh $(O) libfuzzer

# Each unit test again with its allocations made to fail one at a time (STYLE.md 11), in
# an ASan build in $(OOM_O); tools/test-oom.py says how. Minutes: not part of `make test`;
# run it before resolving an issue.
OOM_O ?= build/asan
test-oom: deps
	@$(MAKE) --no-print-directory MODE=asan O=$(OOM_O) unit-bins
	@/usr/bin/python3 tools/test-oom.py $(OOM_O)

asan:
	@$(MAKE) --no-print-directory MODE=asan test
ubsan:
	@$(MAKE) --no-print-directory MODE=ubsan test
tsan:
	@$(MAKE) --no-print-directory MODE=tsan test

bench: deps
	@$(MAKE) --no-print-directory all
	@/usr/bin/python3 bench/run.py --bin $(O)/bin
	@/usr/bin/python3 bench/scale.py --bin $(O)/bin
	@/usr/bin/python3 bench/soak.py --bin $(O)/bin

# the soak alone (bench/soak.py, docs/gwbench.md): SOAK_SECS=60 for a quicker run
.PHONY: soak
SOAK_SECS ?= 600
soak: deps
	@$(MAKE) --no-print-directory all
	@/usr/bin/python3 bench/soak.py --bin $(O)/bin --secs $(SOAK_SECS)

check-deps:
	@sh tools/check-deps.sh

# ---- container image (docs/deploy.md) ----
# `make image` builds $(IMAGE) with podman from the Dockerfile; the first time it runs
# tools/image-base.sh (installs podman, buildah, runc, mmdebstrap; makes the base image
# debian:bookworm-slim locally: no registry needed). --format docker keeps the HEALTHCHECK;
# --pull=never: the base is local; --network=host: the build stage's apt-get needs no
# container network.
# `make image-test` runs the image for real (tools/image-test.sh); not part of `make test`.
IMAGE ?= localhost/gw:latest
image:
	@podman image exists docker.io/library/debian:bookworm-slim 2>/dev/null || sh tools/image-base.sh
	podman build --format docker --pull=never --network=host -t $(IMAGE) .
	@podman image inspect --format 'image: {{index .RepoTags 0}} {{.Size}} bytes' $(IMAGE)

image-test: image
	@sh tools/image-test.sh $(IMAGE)

# The tracked sources (what a clean checkout has), less any deleted in the work tree.
FMT_FILES = $(wildcard $(shell git ls-files '*.c' '*.h'))
fmt:
	clang-format -i $(FMT_FILES)
check-fmt:
	@clang-format --dry-run --Werror $(FMT_FILES) && echo "check-fmt: ok ($(words $(FMT_FILES)) files)"

clean:
	rm -rf build bin

help:
	@echo "make            build bin/gwd, bin/gwctl, bin/gwbench (MODE=release|debug|asan|ubsan|tsan)"
	@echo "make deps       install missing Debian packages (apt-get)"
	@echo "make run        build, start gwbench upstream on :9100 and gwd on :8080 (demo config)"
	@echo "make test       deps, build, check-deps and check-fmt, unit tests, fuzz corpus replay,"
	@echo "                libFuzzer runs of every fuzz target (10 s each), end-to-end tests"
	@echo "make unit       unit tests only;  make e2e  end-to-end tests only"
	@echo "make asan|ubsan|tsan   make test with sanitizers, into build/<mode>/"
	@echo "make test-oom   each unit test again with its allocations failing one at a time"
	@echo "                (ASan build in build/asan/, minutes; not part of make test)"
	@echo "make fuzz       build the libFuzzer targets with clang (build/fuzz/) and run each"
	@echo "                FUZZ_SECS seconds (default 60) on a copy of its corpus"
	@echo "make bench      benchmarks (~25 min): run.py (direct, ten hub cells, gwd+adm, nginx; 1 and 2 workers; HTTP/2), scale.py (10 000 streams), soak.py"
	@echo "make soak       the 10-minute soak alone (bench/soak.py; SOAK_SECS=60 for a shorter one); make bench runs it too"
	@echo "make check-deps module boundary check;  make fmt / check-fmt"
	@echo "make image      container image localhost/gw:latest with podman (docs/deploy.md);"
	@echo "                makes the base debian:bookworm-slim locally the first time"
	@echo "make image-test build the image and run it for real: chat, gwctl, healthcheck, SIGTERM,"
	@echo "                store on a volume (podman; not part of make test)"
	@echo "make clean"

-include $(shell find $(O) -name '*.d' 2>/dev/null)
