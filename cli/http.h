/* SPDX-License-Identifier: MIT
 * cli/http.h - gwctl's HTTP client: one blocking GET or POST per connection to the control API
 * (HTTP/1.1, Connection: close), responses framed by http-parser (content-length,
 * chunked or close), JSON bodies decoded with jansson.
 * Owns:    the socket of one call, closed before it returns.
 * Threads: the main thread only; blocks (10 s socket timeouts).
 * See:     cli/http.c
 */
#ifndef GW_CLI_HTTP_H
#define GW_CLI_HTTP_H

#include <stddef.h>

#include <jansson.h>

#include "cli/cli.h"
#include "core/str.h"

struct cli_http_resp {
    int status;         /* HTTP status */
    struct gw_buf body; /* the body; caller frees with gw_buf_fini */
};

/* Sends <method> <path> (starting with '/') to the server of <o>->url, with <o>->token as
 * a bearer token when set and, when <body> is not NULL, <len> bytes of <body> as
 * application/json. Returns 0 and fills <resp> (any HTTP status) once a whole response
 * was read; -1 with a message in <err> (size <errlen>) when the URL is not
 * http://HOST[:PORT][/PREFIX], the server cannot be reached or the answer is not HTTP. */
int cli_http_request(const struct cli_opts *o, const char *method, const char *path,
                     const char *body, size_t len, struct cli_http_resp *resp, char *err,
                     size_t errlen);
/* cli_http_request with GET and no body. */
int cli_http_get(const struct cli_opts *o, const char *path, struct cli_http_resp *resp, char *err,
                 size_t errlen);

/* Sends <method> <path> with <body> (NULL: none) and decodes a 2xx JSON answer into
 * <*out> (caller json_decref()s it). On failure prints one line to stderr -
 * "gwctl: <code>: <message> (HTTP <status>)" for an error body, the transport error
 * otherwise - and returns CLI_EXIT_ERROR; CLI_EXIT_OK on success. */
int cli_api_call(const struct cli_opts *o, const char *method, const char *path, const char *body,
                 size_t len, json_t **out);

/* cli_api_call with GET and no body. */
int cli_api_get(const struct cli_opts *o, const char *path, json_t **out);

/* GET <path> as a stream: calls <on_line> for every line of the body as it arrives
 * (chunk-size lines of a chunked body included: callers pick the lines they know),
 * until the server closes or <on_line> returns non-zero. 0, or -1 with <err> set. */
int cli_http_stream(const struct cli_opts *o, const char *path,
                    int (*on_line)(void *arg, const char *line), void *arg, char *err,
                    size_t errlen);

#endif
