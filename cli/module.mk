# cli sources: every .c in cli/.
CLI_SRC := $(wildcard cli/*.c)
CLI_OBJ := $(patsubst %.c,$(O)/%.o,$(CLI_SRC))
