#!/bin/sh
# Module boundary check (STYLE.md 2): which folder may include which, which library
# families each folder may call, and that core/ and dialects/ call no clock, I/O,
# entropy, threads or process control. Prints every violation; exits 1 if there is any.
#
# Checked: the .c/.h files of core dialects store net cli bench, tracked or new (not
# ignored), since module.mk builds every .c of a folder. Calls are found on a copy of
# each file with its comments and string literals blanked (line numbers kept): a name
# followed by "(" and not preceded by "." or "->" (a member is not the libc function).
cd "$(dirname "$0")/.." || exit 2
set -f # globs below are patterns for `case`, never file names
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
: >"$tmp/violations"

# ---- exceptions ----
# One line each: file glob, name glob (a function, `stderr`, or an <header.h>), why.
# Each has a line in docs/ARCHITECTURE.md. Keep them few and narrow.
EXCEPTIONS='
core/assert.h fprintf GW_ASSERT says which invariant broke before abort(); no logger can be trusted then
core/assert.h stderr GW_ASSERT and GW_ASSERT_ALLOC write their one line to stderr
core/assert.h abort GW_ASSERT ends the process on a broken invariant (STYLE 6)
core/assert.h exit GW_ASSERT_ALLOC: out of memory at boot exits with a message (STYLE 6)
core/log.c fputs lines logged before the logger thread attaches (startup) go straight to stderr
core/log.c stderr lines logged before the logger thread attaches (startup) go straight to stderr
bench/*.c pthread_* gwbench runs one libevent loop per thread (load generator and fake upstream)
bench/*.c <pthread.h> gwbench runs one libevent loop per thread (load generator and fake upstream)
dialects/bedrock_stream.c <zlib.h> crc32_z: the CRC32 (IEEE) of AWS eventstream frames; no decoding (banned below)
'

is_exception() { # file name
    echo "$EXCEPTIONS" | while read -r fg ng _; do
        [ -n "$fg" ] || continue
        # shellcheck disable=SC2254
        case $1 in $fg) case $2 in $ng) echo y; break ;; esac ;; esac
    done | grep -q y
}

report() { # file line what
    echo "check-deps: $1:$2: $3"
    echo x >>"$tmp/violations"
}

in_scope() { # file "glob !glob ...": the file matches a glob and no !glob
    r=1
    for g in $2; do
        case $g in
        !*) # shellcheck disable=SC2254
            case $1 in ${g#!}) return 1 ;; esac ;;
        *) # shellcheck disable=SC2254
            case $1 in $g) r=0 ;; esac ;;
        esac
    done
    return $r
}

files=$(git ls-files -co --exclude-standard -- 'core/*.[ch]' 'dialects/*.[ch]' 'store/*.[ch]' \
    'net/*.[ch]' 'cli/*.[ch]' 'bench/*.[ch]' | sort -u)
for f in $files; do
    [ -f "$f" ] || continue # deleted in the work tree, not yet in the index
    mkdir -p "$tmp/src/${f%/*}"
    echo "$f" >>"$tmp/list"
done
files=$(cat "$tmp/list" 2>/dev/null)
# shellcheck disable=SC2086
awk -v out="$tmp/src/" '
    # Blank comments and the insides of string and character literals, keeping every
    # newline; #include lines are kept as they are. "(" becomes "( " so that in
    # "time(rand())" the match of "time(" leaves the character before "rand" to match.
    FNR == 1 { if (dst) close(dst); dst = out FILENAME; incomment = 0 }
    !incomment && /^[ \t]*#[ \t]*include/ { print > dst; next }
    {
        s = ""; n = length($0); i = 1
        while (i <= n) {
            c = substr($0, i, 1); d = substr($0, i, 2)
            if (incomment) {
                if (d == "*/") { incomment = 0; s = s "  "; i += 2 } else { s = s " "; i++ }
            } else if (d == "/*") { incomment = 1; s = s "  "; i += 2
            } else if (d == "//") { break
            } else if (c == "\"" || c == "\047") {
                q = c; s = s q; i++
                while (i <= n) {
                    c = substr($0, i, 1)
                    if (c == "\\") { s = s "  "; i += 2; continue }
                    s = s (c == q ? q : " "); i++
                    if (c == q) break
                }
            } else { s = s (c == "(" ? "( " : c); i++ }
        }
        print s > dst
    }' $files

# ban SCOPE ERE WHAT [ALLOWED]: in the files of SCOPE (in_scope globs), a name matching
# ERE is a violation, unless it matches the whole-name ERE ALLOWED or is an exception.
# ERE matches a name; calls get "(" appended by ban_call.
ban() {
    scope=""
    for f in $files; do in_scope "$f" "$1" && scope="$scope $f"; done
    [ -n "$scope" ] || return 0
    # shellcheck disable=SC2086
    (cd "$tmp/src" && grep -noE "(^|[^.>[:alnum:]_])($2)" $scope) | while IFS=: read -r f ln m; do
        case $m in
        *'#'*include*) name="<${m#*<}" ;; # the header, <...>
        *) name=${m#[!A-Za-z_]} && name=${name%%[!A-Za-z0-9_]*} ;;
        esac
        if [ -n "$4" ] && echo "$name" | grep -qE "^($4)\$"; then continue; fi
        is_exception "$f" "$name" && continue
        report "$f" "$ln" "$3: $name"
    done
}
ban_call() { ban "$1" "($2)[[:space:]]*\\(" "$3" "$4"; }
ban_include() { ban "$1" "#[[:space:]]*include[[:space:]]*<($2)[^>]*>" "$3"; }

# ---- project includes ----
# shellcheck disable=SC2086
grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $files | while IFS=: read -r f ln line; do
    mod=${f%%/*}
    case $mod in
    core) allow="core" ;;
    dialects) allow="core dialects" ;;
    store) allow="core store" ;;
    net) allow="core dialects store net" ;;
    cli) allow="core cli" ;;
    bench) allow="core bench" ;;
    esac
    inc=${line#*\"}
    inc=${inc%%\"*}
    dir=${inc%%/*}
    [ "$dir" = "$inc" ] && { report "$f" "$ln" "include without its folder: \"$inc\""; continue; }
    case " $allow " in *" $dir "*) ;; *) report "$f" "$ln" "includes $dir/ (allowed: $allow)" ;; esac
    # a module's -priv.h stays inside the module (STYLE 4)
    case $inc in *-priv.h) [ "$dir" = "$mod" ] || report "$f" "$ln" "includes another module's private header $inc" ;; esac
    # an x-t.h includes only system headers and other -t.h files (STYLE 4)
    case $f in *-t.h) case $inc in *-t.h) ;; *) report "$f" "$ln" "a -t.h includes $inc" ;; esac ;; esac
done

# ---- libraries: which module may call which family (STYLE 2) ----
LIBEVENT='(event|evbuffer|bufferevent|evhttp|evconnlistener|evutil|evdns|evthread|evtimer|evsignal)_[[:alnum:]_]+'
OPENSSL='(SSL|TLS|DTLS|BIO|X509|PEM|ERR|RAND|OPENSSL|OSSL|CRYPTO|EVP|HMAC|SHA[0-9]+|MD5)[[:alnum:]_]*'
# libcrypto's digests and HMAC: pure functions, allowed in core and dialects
DIGESTS='SHA[0-9]+(_Init|_Update|_Final)?|HMAC(_[[:alnum:]_]+)?|EVP_(Digest[[:alnum:]_]*|MD_[[:alnum:]_]*|sha[0-9]+|md5|get_digestbyname)|CRYPTO_memcmp'
ban_call 'core/* dialects/* net/* cli/* bench/*' 'mdb_[[:alnum:]_]+' 'LMDB (store only)'
ban_include 'core/* dialects/* net/* cli/* bench/*' 'lmdb\.h' 'LMDB (store only)'
ban_call 'core/* dialects/* store/*' "$LIBEVENT" 'libevent (net, cli, bench only)'
ban_include 'core/* dialects/* store/*' 'event2/' 'libevent (net, cli, bench only)'
ban_call 'core/* dialects/* store/*' 'nghttp2_[[:alnum:]_]+' 'nghttp2 (net, cli, bench only)'
ban_include 'core/* dialects/* store/*' 'nghttp2/' 'nghttp2 (net, cli, bench only)'
ban_call 'core/* dialects/*' "$OPENSSL" 'OpenSSL beyond digests and HMAC' "$DIGESTS"
ban_include 'core/* dialects/*' 'openssl/([^sehc]|s[^h]|e[^v]|h[^m]|c[^r])' 'OpenSSL beyond digests and HMAC'
ban_call 'store/*' "$OPENSSL" 'OpenSSL'
ban_include 'store/*' 'openssl/' 'OpenSSL'
ban_call 'core/* store/*' 'json_[[:alnum:]_]+' 'jansson (dialects, net, cli, bench only)'
ban_include 'core/* store/*' 'jansson\.h' 'jansson (dialects, net, cli, bench only)'
ban_call '* !core/conf*' 'cyaml_[[:alnum:]_]+' 'libcyaml (core/conf* only)'
ban_include '* !core/conf*' 'cyaml/' 'libcyaml (core/conf* only)'
# libyaml's document tree: conf*.c reads the three keys libcyaml cannot express and
# yaml_edit.c splices one model_specs entry of the config text (docs/ARCHITECTURE.md).
ban_call '* !core/conf* !core/yaml_edit.c' 'yaml_[[:alnum:]_]+' 'libyaml (core/conf*, core/yaml_edit.c only)'
ban_include '* !core/conf* !core/yaml_edit.c' 'yaml\.h' 'libyaml (core/conf*, core/yaml_edit.c only)'
# zlib, libbrotlidec, libzstd: pure decoders, called only from the one file that
# decodes request bodies (core/decode.h), so that every body limit lives in one place.
ban_call '* !core/decode.c' '(inflate|deflate)[[:alnum:]_]*|Brotli[[:alnum:]_]+|ZSTD_[[:alnum:]_]+' 'zlib, brotli, zstd (core/decode.c only)'
ban_include '* !core/decode.c' 'zlib\.h|brotli/|zstd\.h|zstd_errors\.h|zdict\.h' 'zlib, brotli, zstd (core/decode.c only)'
# dialects/bedrock_stream.c includes zlib.h for crc32_z alone (the exception above):
# nothing else of zlib there.
ban_call 'dialects/bedrock_stream.c' '(compress|uncompress|gz|adler32|zlib)[[:alnum:]_]*' 'zlib beyond crc32 (dialects/bedrock_stream.c)'
ban_call 'core/* dialects/* store/* cli/* bench/*' 'wslay_[[:alnum:]_]+' 'wslay (net only)'
ban_include 'core/* dialects/* store/* cli/* bench/*' 'wslay/' 'wslay (net only)'
ban_call 'core/* dialects/* store/*' 'http_parser_[[:alnum:]_]+' 'http-parser (net, cli, bench only)'
ban_include 'core/* dialects/* store/*' 'http_parser\.h' 'http-parser (net, cli, bench only)'
ban_call 'dialects/* cli/* bench/*' 'ck_[[:alnum:]_]+' 'ConcurrencyKit (core, store, net only)'
ban_include 'dialects/* cli/* bench/*' 'ck_' 'ConcurrencyKit (core, store, net only)'
# one spinlock in core: core/spin.h
ban_call 'core/*' 'ck_spinlock[[:alnum:]_]*' 'ck_spinlock (core/spin.h is the spinlock of core)'
ban_include 'core/*' 'ck_spinlock\.h' 'ck_spinlock (core/spin.h is the spinlock of core)'
ban_call 'core/* dialects/* cli/* bench/*' '(pthread|thrd|mtx|cnd|tss)_[[:alnum:]_]+|call_once' 'threads (store, net only)'
ban_include 'core/* dialects/* cli/* bench/*' 'pthread\.h|threads\.h' 'threads (store, net only)'

# ---- core and dialects: no clock, I/O, entropy or process control (STYLE 2) ----
# Time and random state are arguments. gmtime_r and timegm are allowed: pure calendar
# arithmetic on a value given (localtime and mktime read the zone files).
PURE='core/* dialects/*'
ban_call "$PURE" 'time|clock|clock_gettime|clock_getres|gettimeofday|ftime|timespec_get|localtime|localtime_r|mktime|tzset|sleep|usleep|nanosleep|clock_nanosleep' 'a clock'
ban_call "$PURE" 'rand|rand_r|random|random_r|srand|srandom|[delnjm]rand48|srand48|seed48|arc4random[[:alnum:]_]*|getrandom|getentropy' 'entropy'
ban_call "$PURE" 'open|openat|creat|close|read|write|pread|pwrite|readv|writev|lseek|fsync|fopen|freopen|fdopen|fmemopen|open_memstream|fclose|fread|fwrite|fgets|fgetc|getc|getchar|gets|getline|getdelim|ungetc|fputs|fputc|putc|putchar|puts|printf|vprintf|fprintf|vfprintf|dprintf|vdprintf|perror|fflush|fscanf|vfscanf|scanf|vscanf|setvbuf|setbuf|socket|socketpair|connect|accept|accept4|bind|listen|send|sendto|sendmsg|recv|recvfrom|recvmsg|shutdown|getaddrinfo|gethostbyname|poll|ppoll|select|pselect|epoll_[[:alnum:]_]+|ioctl|fcntl|mmap|munmap|stat|fstat|lstat|access|unlink|rename|mkdir|rmdir|opendir|readdir|closedir|chdir|getcwd|dup|dup2|dup3|pipe|pipe2|syslog|openlog' 'I/O'
ban "$PURE" '(stdin|stdout|stderr)([^[:alnum:]_]|$)' 'I/O'
ban_call "$PURE" 'exit|_exit|_Exit|abort|atexit|quick_exit|at_quick_exit|signal|sigaction|raise|kill|fork|vfork|exec[lv]p?e?|system|popen|pclose|getpid|getppid|gettid|syscall|getenv|secure_getenv|setenv|unsetenv|putenv|dlopen|dlsym' 'process control or environment'
ban_include "$PURE" 'unistd\.h|fcntl\.h|poll\.h|dirent\.h|netdb\.h|signal\.h|dlfcn\.h|sys/(socket|stat|time|random|mman|epoll|uio|ioctl|select)\.h|netinet/|arpa/' 'an I/O or process header'

n=$(wc -l <"$tmp/violations")
if [ "$n" = 0 ]; then
    echo "check-deps: ok ($(echo "$files" | wc -w) files)"
    exit 0
fi
echo "check-deps: $n violation(s); an exception needs a line in this script and in docs/ARCHITECTURE.md"
exit 1
