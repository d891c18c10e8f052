# core sources: every .c in core/.
CORE_SRC := $(wildcard core/*.c)
CORE_OBJ := $(patsubst %.c,$(O)/%.o,$(CORE_SRC))
