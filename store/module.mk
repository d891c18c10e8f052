# store sources: every .c in store/.
STORE_SRC := $(wildcard store/*.c)
STORE_OBJ := $(patsubst %.c,$(O)/%.o,$(STORE_SRC))
