/* SPDX-License-Identifier: MIT
 * core/yaml_edit.h - edits of the YAML config text that keep every byte outside the
 * edited entry (DESIGN.md 14: "edits only its own entry in the YAML file so the rest
 * stays byte for byte"). Today: one providers[].model_specs entry.
 * Pure: text in, text out; reads libyaml's node marks for byte positions, does no I/O.
 * Owns:    nothing beyond one call (the output buffer is the caller's).
 * Threads: any; never blocks.
 * See:     core/yaml_edit.c, net/control.c (PUT /control/v1/provider-model-spec),
 *          tests/unit/core/test_yaml_edit.c, tests/fuzz/fuzz_yaml_edit.c
 */
#ifndef GW_CORE_YAML_EDIT_H
#define GW_CORE_YAML_EDIT_H

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

#endif
