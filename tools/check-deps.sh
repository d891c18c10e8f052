#!/bin/sh
# Module boundary check (STYLE.md 2): which folder may include which, and which library
# families each folder may call. Prints every violation; exits 1 if there is any.
cd "$(dirname "$0")/.." || exit 2
bad=0
report() { echo "check-deps: $1"; bad=1; }

# includes of project headers
for f in $(git ls-files 'core/*.[ch]' 'dialects/*.[ch]' 'store/*.[ch]' 'net/*.[ch]' 'cli/*.[ch]' 'bench/*.[ch]'); do
    mod=${f%%/*}
    case $mod in
    core) allow="core" ;;
    dialects) allow="core dialects" ;;
    store) allow="core store" ;;
    net) allow="core dialects store net" ;;
    cli) allow="core cli" ;;
    bench) allow="core bench" ;;
    esac
    for inc in $(sed -n 's/^#include "\([a-z]*\)\/.*/\1/p' "$f"); do
        case " $allow " in *" $inc "*) ;; *) report "$f includes $inc/ (allowed: $allow)" ;; esac
    done
    # a module's -priv.h stays inside the module
    for p in $(sed -n 's/^#include "\([a-z]*\)\/[a-z_]*-priv\.h".*/\1/p' "$f"); do
        [ "$p" = "$mod" ] || report "$f includes another module's private header ($p)"
    done
done

# library families
check_calls() { # folder pattern what
    for f in $(git ls-files "$1/*.c" "$1/*.h"); do
        if grep -nE "$2" "$f" >/dev/null; then report "$f calls $3: $(grep -nE "$2" "$f" | head -n 1)"; fi
    done
}
check_calls core '\b(mdb_|event_|evbuffer_|bufferevent_|SSL_|nghttp2_|json_)[a-z_]*\(' 'LMDB/libevent/OpenSSL/nghttp2/jansson'
check_calls dialects '\b(mdb_|event_|evbuffer_|bufferevent_|SSL_|nghttp2_)[a-z_]*\(' 'LMDB/libevent/OpenSSL/nghttp2'
check_calls store '\b(event_|evbuffer_|bufferevent_|SSL_|nghttp2_|json_)[a-z_]*\(' 'libevent/OpenSSL/nghttp2/jansson'
for m in net cli bench dialects; do check_calls $m '\bmdb_[a-z_]*\(' 'LMDB'; done
check_calls bench '#include "dialects/' 'dialects'
# core: libcyaml only from conf*.c
for f in $(git ls-files 'core/*.c' | grep -v '^core/conf'); do
    grep -n 'cyaml_' "$f" >/dev/null && report "$f calls libcyaml outside core/conf*.c"
done
[ $bad = 0 ] && echo "check-deps: ok"
exit $bad
