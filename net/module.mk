# net sources: every .c in net/.
NET_SRC := $(wildcard net/*.c)
NET_OBJ := $(patsubst %.c,$(O)/%.o,$(NET_SRC))
