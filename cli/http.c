/* SPDX-License-Identifier: MIT
 * cli/http.c - a minimal blocking HTTP/1.1 client for gwctl: parse the URL, connect with
 * timeouts, send one GET or POST with Connection: close, frame the answer with
 * http-parser.
 * Owns:    the socket and parser of one call.
 * Threads: the main thread only; blocks.
 * See:     cli/http.h
 */
#include "cli/http.h"

#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <http_parser.h>

#define CLI_HTTP_TIMEOUT_SECS 10
#define CLI_HTTP_MAX_BODY (64u * 1024 * 1024)

struct cli_url {
    char host[256]; /* without brackets */
    char port[8];
    char authority[280]; /* for the Host header, as written */
    char prefix[512];    /* path prefix without a trailing '/', "" when none */
};

/* Splits http://HOST[:PORT][/PREFIX]. */
static int
url_parse(const char *url, struct cli_url *u, char *err, size_t errlen)
{
    const char *p, *auth_end, *host, *host_end, *port = NULL;
    size_t n;

    memset(u, 0, sizeof(*u));
    if (strncmp(url, "http://", 7) != 0) {
        snprintf(err, errlen, "%s: the control URL must start with http://", url);
        return -1;
    }
    p = url + 7;
    auth_end = p + strcspn(p, "/?#");
    if (auth_end == p || (size_t)(auth_end - p) >= sizeof(u->authority)) {
        snprintf(err, errlen, "%s: no host in the control URL", url);
        return -1;
    }
    memcpy(u->authority, p, (size_t)(auth_end - p));
    if (*p == '[') {
        host = p + 1;
        host_end = memchr(host, ']', (size_t)(auth_end - host));
        if (!host_end) {
            snprintf(err, errlen, "%s: unterminated [IPv6] host", url);
            return -1;
        }
        if (host_end + 1 < auth_end) {
            if (host_end[1] != ':') {
                snprintf(err, errlen, "%s: bad host", url);
                return -1;
            }
            port = host_end + 2;
        }
    } else {
        host = p;
        host_end = memchr(p, ':', (size_t)(auth_end - p));
        if (host_end)
            port = host_end + 1;
        else
            host_end = auth_end;
    }
    n = (size_t)(host_end - host);
    if (n == 0 || n >= sizeof(u->host)) {
        snprintf(err, errlen, "%s: bad host", url);
        return -1;
    }
    memcpy(u->host, host, n);
    if (port) {
        n = (size_t)(auth_end - port);
        if (n == 0 || n > 5 || strspn(port, "0123456789") < n) {
            snprintf(err, errlen, "%s: bad port", url);
            return -1;
        }
        memcpy(u->port, port, n);
    } else {
        strcpy(u->port, "80");
    }
    n = strcspn(auth_end, "?#");
    while (n > 0 && auth_end[n - 1] == '/')
        n--;
    if (n >= sizeof(u->prefix)) {
        snprintf(err, errlen, "%s: path too long", url);
        return -1;
    }
    memcpy(u->prefix, auth_end, n);
    return 0;
}

static int
dial(const struct cli_url *u, const char *url, char *err, size_t errlen)
{
    struct addrinfo hints = {0}, *res = NULL, *ai;
    struct timeval tv = {CLI_HTTP_TIMEOUT_SECS, 0};
    int fd = -1, e, last = ECONNREFUSED;

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    e = getaddrinfo(u->host, u->port, &hints, &res);
    if (e != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", u->host, gai_strerror(e));
        return -1;
    }
    for (ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        /* On Linux SO_SNDTIMEO also bounds connect(). */
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        last = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(err, errlen, "cannot connect to %s: %s", url, strerror(last));
    return fd;
}

static int
send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

struct parse_state {
    struct cli_http_resp *resp;
    bool done;
    bool too_big;
};

static int
on_body(http_parser *p, const char *at, size_t len)
{
    struct parse_state *s = p->data;

    if (s->resp->body.len + len > CLI_HTTP_MAX_BODY) {
        s->too_big = true;
        return 1;
    }
    return gw_buf_append(&s->resp->body, at, len) == GW_OK ? 0 : 1;
}

static int
on_complete(http_parser *p)
{
    struct parse_state *s = p->data;

    s->done = true;
    return 0;
}

int
cli_http_request(const struct cli_opts *o, const char *method, const char *path, const char *body,
                 size_t len, struct cli_http_resp *resp, char *err, size_t errlen)
{
    struct cli_url u;
    struct gw_buf req = {0};
    http_parser parser;
    http_parser_settings settings = {0};
    struct parse_state st = {resp, false, false};
    char buf[16384];
    int fd, rc = -1;
    bool tok = o->token && *o->token;

    memset(resp, 0, sizeof(*resp));
    if (url_parse(o->url, &u, err, errlen) != 0)
        return -1;
    if (tok && strpbrk(o->token, "\r\n")) {
        snprintf(err, errlen, "the control token contains a line break");
        return -1;
    }
    if (gw_buf_printf(&req,
                      "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: gwctl\r\n"
                      "Accept: application/json\r\nConnection: close\r\n%s%s%s",
                      method, u.prefix, path, u.authority, tok ? "Authorization: Bearer " : "",
                      tok ? o->token : "", tok ? "\r\n" : "") != GW_OK ||
        (body && gw_buf_printf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                               len) != GW_OK) ||
        gw_buf_append(&req, "\r\n", 2) != GW_OK ||
        (body && gw_buf_append(&req, body, len) != GW_OK)) {
        gw_buf_fini(&req);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    fd = dial(&u, o->url, err, errlen);
    if (fd < 0) {
        gw_buf_fini(&req);
        return -1;
    }
    if (send_all(fd, req.data, req.len) != 0) {
        snprintf(err, errlen, "%s: cannot send the request: %s", o->url, strerror(errno));
        goto out;
    }
    http_parser_init(&parser, HTTP_RESPONSE);
    parser.data = &st;
    settings.on_body = on_body;
    settings.on_message_complete = on_complete;
    while (!st.done) {
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        size_t used;

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "%s: %s", o->url,
                     errno == EAGAIN ? "no answer within 10 s" : strerror(errno));
            goto out;
        }
        used = http_parser_execute(&parser, &settings, buf, (size_t)r);
        if (HTTP_PARSER_ERRNO(&parser) != HPE_OK || (r > 0 && used != (size_t)r)) {
            if (st.too_big)
                snprintf(err, errlen, "%s: the answer is larger than 64 MiB", o->url);
            else
                snprintf(err, errlen, "%s: not an HTTP answer: %s", o->url,
                         http_errno_description(HTTP_PARSER_ERRNO(&parser)));
            goto out;
        }
        if (r == 0 && !st.done) {
            snprintf(err, errlen, "%s: the connection closed mid-answer", o->url);
            goto out;
        }
    }
    resp->status = (int)parser.status_code;
    rc = 0;
out:
    if (rc != 0)
        gw_buf_fini(&resp->body);
    close(fd);
    gw_buf_fini(&req);
    return rc;
}

int
cli_http_get(const struct cli_opts *o, const char *path, struct cli_http_resp *resp, char *err,
             size_t errlen)
{
    return cli_http_request(o, "GET", path, NULL, 0, resp, err, errlen);
}

int
cli_api_call(const struct cli_opts *o, const char *method, const char *path, const char *body,
             size_t len, json_t **out)
{
    struct cli_http_resp resp;
    char err[512];
    json_t *j, *code, *msg;
    json_error_t jerr;

    *out = NULL;
    if (cli_http_request(o, method, path, body, len, &resp, err, sizeof(err)) != 0) {
        fprintf(stderr, "gwctl: %s\n", err);
        return CLI_EXIT_ERROR;
    }
    j = json_loadb(resp.body.data ? resp.body.data : "", resp.body.len, 0, &jerr);
    if (resp.status < 200 || resp.status > 299) {
        code = json_object_get(json_object_get(j, "error"), "code");
        msg = json_object_get(json_object_get(j, "error"), "message");
        if (json_is_string(code))
            fprintf(stderr, "gwctl: %s: %s (HTTP %d)\n", json_string_value(code),
                    json_is_string(msg) ? json_string_value(msg) : "", resp.status);
        else
            fprintf(stderr, "gwctl: %s %s: HTTP %d\n", method, path, resp.status);
        json_decref(j);
        gw_buf_fini(&resp.body);
        return CLI_EXIT_ERROR;
    }
    gw_buf_fini(&resp.body);
    if (!j) {
        fprintf(stderr, "gwctl: %s %s: the answer is not JSON: %s\n", method, path, jerr.text);
        return CLI_EXIT_ERROR;
    }
    *out = j;
    return CLI_EXIT_OK;
}

int
cli_api_get(const struct cli_opts *o, const char *path, json_t **out)
{
    return cli_api_call(o, "GET", path, NULL, 0, out);
}

/* ---- streams (GET /control/v1/events) ---- */

int
cli_http_stream(const struct cli_opts *o, const char *path,
                int (*on_line)(void *arg, const char *line), void *arg, char *err, size_t errlen)
{
    struct cli_url u;
    struct gw_buf req = {0}, acc = {0};
    struct timeval forever = {0, 0};
    bool tok = o->token && *o->token, head_done = false;
    char buf[8192];
    int fd, rc = -1;

    if (url_parse(o->url, &u, err, errlen) != 0)
        return -1;
    if (tok && strpbrk(o->token, "\r\n")) {
        snprintf(err, errlen, "the control token contains a line break");
        return -1;
    }
    if (gw_buf_printf(&req,
                      "GET %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: gwctl\r\n"
                      "Accept: text/event-stream\r\nConnection: close\r\n%s%s%s\r\n",
                      u.prefix, path, u.authority, tok ? "Authorization: Bearer " : "",
                      tok ? o->token : "", tok ? "\r\n" : "") != GW_OK) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    fd = dial(&u, o->url, err, errlen);
    if (fd < 0)
        goto out;
    if (write(fd, req.data, req.len) != (ssize_t)req.len) {
        snprintf(err, errlen, "cannot send the request: %s", strerror(errno));
        goto out;
    }
    /* An event stream may be quiet for long: no read timeout once connected. */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof(forever));
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        char *nl;

        if (n <= 0)
            break;
        gw_buf_append(&acc, buf, (size_t)n);
        while (acc.data && (nl = memchr(acc.data, '\n', acc.len)) != NULL) {
            size_t len = (size_t)(nl - acc.data);

            *nl = '\0';
            if (len && acc.data[len - 1] == '\r')
                acc.data[len - 1] = '\0';
            if (!head_done) {
                if (strncmp(acc.data, "HTTP/1.", 7) == 0 && strncmp(acc.data + 9, "200", 3) != 0) {
                    snprintf(err, errlen, "the control API answered %s", acc.data + 9);
                    gw_buf_consume(&acc, len + 1);
                    goto out;
                }
                if (acc.data[0] == '\0')
                    head_done = true;
            } else if (on_line(arg, acc.data) != 0) {
                rc = 0;
                gw_buf_consume(&acc, len + 1);
                goto out;
            }
            gw_buf_consume(&acc, len + 1);
        }
    }
    rc = head_done ? 0 : -1;
    if (!head_done)
        snprintf(err, errlen, "the connection closed before an answer");
out:
    if (fd >= 0)
        close(fd);
    gw_buf_fini(&req);
    gw_buf_fini(&acc);
    return rc;
}
