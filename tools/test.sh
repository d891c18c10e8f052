#!/bin/sh
# Runs the test suites of one build folder and ends with the line "N passed, N failed".
# usage: tools/test.sh BUILD_DIR [unit|fuzz|e2e]...   (no suite named: all three)
O=$1
shift
suites=${*:-unit fuzz e2e}
# Sanitizer builds: TSan reads the suppressions of ck's uninstrumented atomics; every
# other report fails the run. Harmless for other builds.
export TSAN_OPTIONS="${TSAN_OPTIONS:-suppressions=$(pwd)/tests/tsan.supp second_deadlock_stack=1}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
pass=0
fail=0
log=$(mktemp)
for s in $suites; do
    case $s in
    unit)
        for t in $(find "$O/tests/unit" -type f -perm -u+x -name 'test_*' 2>/dev/null | sort); do
            "$t" >"$log" 2>&1
            rc=$?
            cat "$log"
            p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
            f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
            pass=$((pass + ${p:-0}))
            fail=$((fail + ${f:-0}))
            if [ "$rc" != 0 ] && [ -z "$f" ]; then fail=$((fail + 1)); echo "FAIL $t (exit $rc)"; fi
        done
        ;;
    fuzz)
        for t in $(find "$O/tests/fuzz" -type f -perm -u+x -name 'fuzz_*' 2>/dev/null | sort); do
            n=$(basename "$t")
            n=${n#fuzz_}
            files=$(find "tests/fuzz/corpus/$n" -type f 2>/dev/null)
            if [ -z "$files" ]; then echo "fuzz $n: no corpus"; fail=$((fail + 1)); continue; fi
            # shellcheck disable=SC2086
            if "$t" $files; then pass=$((pass + 1)); echo "fuzz $n: ok"; else fail=$((fail + 1)); echo "FAIL fuzz $n"; fi
        done
        ;;
    e2e)
        GW_BIN="$(pwd)/$O/bin" /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e >"$log" 2>&1
        rc=$?
        cat "$log"
        line=$(grep -E '(passed|failed|error|no tests ran)' "$log" | tail -n 1)
        p=$(echo "$line" | sed -n 's/.* \([0-9]*\) passed.*/\1/p; s/^\([0-9]*\) passed.*/\1/p' | head -n 1)
        f=$(echo "$line" | grep -oE '[0-9]+ (failed|error)' | awk '{s+=$1} END {print s+0}')
        pass=$((pass + ${p:-0}))
        fail=$((fail + ${f:-0}))
        if [ "$rc" != 0 ] && [ "${f:-0}" = 0 ]; then fail=$((fail + 1)); echo "FAIL e2e (pytest exit $rc)"; fi
        ;;
    esac
done
rm -f "$log"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
