/* SPDX-License-Identifier: MIT
 * core/yaml_edit.h - edits of the YAML config text that keep every byte outside the
 * edited entry (DESIGN.md 14: "edits only its own entry in the YAML file so the rest
 * stays byte for byte"): one providers[].model_specs entry, or one whole entry of the
 * providers, groups or clients list.
 * Pure: text in, text out; reads libyaml's node marks for byte positions, does no I/O.
 * Owns:    nothing beyond one call (the output buffer is the caller's).
 * Threads: any; never blocks.
 * See:     core/yaml_edit.c, net/control.c (PUT /control/v1/provider-model-spec),
 *          tests/unit/core/test_yaml_edit.c, tests/fuzz/fuzz_yaml_edit.c
 */
#ifndef GW_CORE_YAML_EDIT_H
#define GW_CORE_YAML_EDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/str.h"

/* What to do with one field of the entry. */
enum gw_yaml_op {
    GW_YAML_KEEP = 0, /* leave it as the file has it (or absent) */
    GW_YAML_SET,      /* write the value */
    GW_YAML_REMOVE,   /* take it out */
};

/* The change asked for one providers[].model_specs.<model> entry. Fields of the entry
 * other than these two (input, output, cache_read, cache_write) are always kept. */
struct gw_yaml_spec_edit {
    enum gw_yaml_op context_window_op;
    uint64_t context_window; /* 1..GW_YAML_SPEC_MAX_TOKENS when SET */
    enum gw_yaml_op max_output_tokens_op;
    uint64_t max_output_tokens; /* 1..GW_YAML_SPEC_MAX_TOKENS when SET */
};

/* The token range the config accepts (core/conf.c, config.model_spec_zero/range). */
#define GW_YAML_SPEC_MAX_TOKENS 100000000u

/* Applies <edit> to the entry <model> of the provider named <provider> in the config
 * text <yaml>/<len> and writes the whole new text to <out> (reset first; the caller
 * owns it and frees it with gw_buf_fini). Bytes outside the edited span are copied as
 * they are: comments, blank lines, quoting, CRLF line ends.
 * - The entry exists: its value is rewritten as one flow mapping
 *   ({context_window: N, max_output_tokens: M, input: ...}) keeping its other fields
 *   as written; when no field is left, the entry is removed, and `model_specs` with it
 *   when it was the last entry.
 * - The entry does not exist and something is SET: it is added to `model_specs` (a
 *   line at the indentation of the other entries in block style, `, "model": {...}`
 *   in flow style), or `model_specs: {"model": {...}}` is added to the provider (a line
 *   at the indentation of its keys, or `, model_specs: ...` in a flow mapping).
 * - Nothing to change: <out> holds the text unchanged.
 * Model ids are written as JSON-style double-quoted scalars.
 * Returns GW_OK; GW_E_CFG_MODEL_SPEC_BLANK_MODEL / GW_E_CFG_MODEL_SPEC_WILDCARD (model
 * blank or "*"), GW_E_CFG_MODEL_SPEC_ZERO (a SET value of 0), GW_E_CFG_RANGE (above
 * GW_YAML_SPEC_MAX_TOKENS); GW_E_CONTROL_UNKNOWN_PROVIDER (no providers[] entry with
 * that name); GW_E_CONTROL_CONFIG_NOT_EDITABLE (not one YAML document, a syntax
 * error, not UTF-8, the provider written twice, anchors or aliases in the provider's
 * entry, a layout this function does not rewrite); GW_E_NOMEM. On any error <out> is
 * empty and <why> (size <whylen>) says what, for the operator.
 * The result is not validated as a config: callers run gw_conf_parse on it. */
enum gw_code gw_yaml_set_model_spec(const char *yaml, size_t len, const char *provider,
                                    const char *model, const struct gw_yaml_spec_edit *edit,
                                    struct gw_buf *out, char *why, size_t whylen);

/* Replaces, adds or removes the entry named <name> of the top-level list <list>
 * ("providers", "groups", "clients": a list of mappings each with a `name`) in the
 * config text <yaml>/<len>, and writes the whole new text to <out> (reset first; the
 * caller owns it). Every byte outside the entry's own span is copied as it was.
 * <entry>/<entry_len> is the new entry as a JSON object (YAML flow or block text works
 * too) with the field names of the YAML; NULL removes the entry. The new entry may carry
 * another name than <name> (a rename: it takes the old entry's place).
 * - The entry exists: its text, from its first key to the end of its last value, is
 *   replaced. In a block list the entry is written in block style (one "key: value"
 *   line per field at the entry's indentation, each value in flow style); an entry
 *   written in flow style (`- {name: a, ...}`, or any entry of a flow list `[...]`) is
 *   written back as one flow mapping. Comments inside the old entry go with it;
 *   comments after it on its last line stay.
 * - The entry does not exist: it is added after the last entry (a line "- ..." at the
 *   column of the list's dashes, in the style of the last entry; ", {...}" in a flow
 *   list); when <list> is absent, "<list>:" and the entry are added at the end of the
 *   top-level mapping. <*created> (may be NULL) is set then.
 * - Removing: the entry's lines go (in a flow list the entry and one comma); removing
 *   the only entry of a block list leaves `<list>: []`.
 * Strings are written plain when that reads back as the same string (a name-like
 * word, not true/false/null/yes/no/on/off), else double-quoted.
 * Returns GW_OK; GW_E_BAD_REQUEST (<name> empty, <entry> not an object or not
 * parseable); GW_E_CONTROL_UNKNOWN_PROVIDER / _CLIENT / _GROUP (removing an entry
 * that is not there); GW_E_CONTROL_CONFIG_NOT_EDITABLE (as gw_yaml_set_model_spec, or
 * the name written twice, or a layout this function does not rewrite); GW_E_NOMEM. On
 * any error <out> is empty and <why> says what. The result is not validated: callers
 * run gw_conf_parse on it. */
enum gw_code gw_yaml_set_entry(const char *yaml, size_t len, const char *list, const char *name,
                               const char *entry, size_t entry_len, struct gw_buf *out,
                               bool *created, char *why, size_t whylen);

#endif
