# dialects sources: every .c in dialects/.
DIALECTS_SRC := $(wildcard dialects/*.c)
DIALECTS_OBJ := $(patsubst %.c,$(O)/%.o,$(DIALECTS_SRC))
