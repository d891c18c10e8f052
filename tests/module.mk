# Unit tests: tests/unit/<module>/test_<file>.c, one cmocka binary each.
# Fuzz targets: tests/fuzz/fuzz_<target>.c, built with tests/fuzz/replay.c to replay
# corpus/<target>/ in `make test`, and with libFuzzer (MODE=fuzz, `make fuzz-build`) for
# the libFuzzer runs of `make test` and `make fuzz`.
UNIT_SRC := $(wildcard tests/unit/*/test_*.c)
UNIT_BIN := $(patsubst %.c,$(O)/%,$(UNIT_SRC))
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(patsubst %.c,$(O)/%,$(FUZZ_SRC))
UNIT_LIBS := $(O)/libgwnet.a $(O)/libgwstore.a $(O)/libgwcore.a

.PHONY: unit-bins fuzz-bins
unit-bins: $(UNIT_BIN)
fuzz-bins: $(FUZZ_BIN)

# What unit tests link beyond gw's own libraries: libbrotlienc makes the br bodies
# tests/unit/core/test_decode.c decodes (zlib and libzstd compress as well as decode).
UNIT_PKG_LIBS = $(shell pkg-config --libs libbrotlienc 2>/dev/null)

# tests/unit/oom.c, in every unit binary, is the hook of `make test-oom` (off unless
# GW_OOM_FAIL is set).
$(O)/tests/unit/%: $(O)/tests/unit/%.o $(O)/tests/unit/oom.o $(UNIT_LIBS)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(O)/tests/unit/oom.o $(UNIT_LIBS) $(PKG_LIBS) $(UNIT_PKG_LIBS) \
	    -lcmocka -lm

# The net/ files a fuzz target may link besides core/ and dialects/: pure ones that use
# no libevent (http-parser is in PKG_LIBS). One wildcard each, so that the line holds
# before the file exists. The replay build gets them from libgwnet.a.
FUZZ_NET_SRC := $(wildcard net/h1req.c) $(wildcard net/h1resp.c) $(wildcard net/wsproto.c)
# and of store/, the value codecs (pure: no LMDB call).
FUZZ_STORE_SRC := $(wildcard store/codec.c)

ifeq ($(MODE),fuzz)
# libFuzzer: the same paths, linked with -fsanitize=fuzzer (LDFLAGS_MODE_fuzz) and the
# pure objects only, so building them needs no net/ file that uses libevent nor a store/
# file that calls LMDB.
$(O)/libgwfuzz.a: $(CORE_OBJ) $(DIALECTS_OBJ) $(patsubst %.c,$(O)/%.o,$(FUZZ_NET_SRC) $(FUZZ_STORE_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(O)/tests/fuzz/%: $(O)/tests/fuzz/%.o $(O)/libgwfuzz.a
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(O)/libgwfuzz.a $(PKG_LIBS)
else
$(O)/tests/fuzz/%: $(O)/tests/fuzz/%.o $(O)/tests/fuzz/replay.o $(UNIT_LIBS)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(O)/tests/fuzz/replay.o $(UNIT_LIBS) $(PKG_LIBS)
endif
