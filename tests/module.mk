# Unit tests: tests/unit/<module>/test_<file>.c, one cmocka binary each.
# Fuzz targets: tests/fuzz/fuzz_<target>.c, built with tests/fuzz/replay.c to replay
# corpus/<target>/ in `make test`, and with libFuzzer by `make fuzz`.
UNIT_SRC := $(wildcard tests/unit/*/test_*.c)
UNIT_BIN := $(patsubst %.c,$(O)/%,$(UNIT_SRC))
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(patsubst %.c,$(O)/%,$(FUZZ_SRC))
UNIT_LIBS := $(O)/libgwnet.a $(O)/libgwstore.a $(O)/libgwcore.a

.PHONY: unit-bins fuzz-bins
unit-bins: $(UNIT_BIN)
fuzz-bins: $(FUZZ_BIN)

$(O)/tests/unit/%: $(O)/tests/unit/%.o $(UNIT_LIBS)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(UNIT_LIBS) $(PKG_LIBS) -lcmocka -lm

$(O)/tests/fuzz/%: $(O)/tests/fuzz/%.o $(O)/tests/fuzz/replay.o $(UNIT_LIBS)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(O)/tests/fuzz/replay.o $(UNIT_LIBS) $(PKG_LIBS)

FUZZ_CC := clang
FUZZ_O := build/fuzz
fuzz:
	@mkdir -p $(FUZZ_O)
	@$(MAKE) --no-print-directory MODE=fuzzlib O=$(FUZZ_O) CC=$(FUZZ_CC) \
	  CFLAGS_MODE_fuzzlib="-O1 -g -fsanitize=fuzzer-no-link,address,undefined" \
	  $(FUZZ_O)/libgwcore.a
	@for s in $(FUZZ_SRC); do n=$$(basename $$s .c); \
	  echo "  FUZZ $$n"; \
	  $(FUZZ_CC) -std=c11 -D_GNU_SOURCE -I. -O1 -g -fsanitize=fuzzer,address,undefined $$s \
	    $(FUZZ_O)/libgwcore.a $(PKG_CFLAGS) $(PKG_LIBS) -o $(FUZZ_O)/$$n || exit 1; done
	@echo "run: build/fuzz/fuzz_<target> tests/fuzz/corpus/<target>/ -max_total_time=60"
