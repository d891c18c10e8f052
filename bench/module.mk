# bench sources: every .c in bench/.
BENCH_SRC := $(wildcard bench/*.c)
BENCH_OBJ := $(patsubst %.c,$(O)/%.o,$(BENCH_SRC))
