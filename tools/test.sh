#!/bin/sh
# Runs the test suites of one build folder and ends with the line "N passed, N failed".
# usage: tools/test.sh BUILD_DIR [checks|unit|fuzz|libfuzzer|e2e]...   (none named: all five)
#   checks     `make check-deps` and `make check-fmt` (STYLE.md 2 and 5), one pass each
#   unit       the cmocka binaries of BUILD_DIR/tests/unit
#   fuzz       each fuzz target's corpus replayed (BUILD_DIR/tests/fuzz, replay.c)
#   libfuzzer  each fuzz target run by libFuzzer for FUZZ_SECS seconds (default 10) on a
#              copy of its corpus in a temporary folder (the repository's is never
#              touched), FUZZ_JOBS at once (default: one per core); binaries from
#              `make fuzz-build` in FUZZ_O (default build/fuzz). One pass per target; a
#              crash, leak or timeout fails it and the input is kept in
#              FUZZ_O/artifacts/<target>/ (the path is printed).
#   e2e        pytest tests/e2e against BUILD_DIR/bin
O=$1
shift
suites=${*:-checks unit fuzz libfuzzer e2e}
# Sanitizer builds: TSan reads the suppressions of ck's uninstrumented atomics; every
# other report fails the run. Harmless for other builds.
export TSAN_OPTIONS="${TSAN_OPTIONS:-suppressions=$(pwd)/tests/tsan.supp second_deadlock_stack=1}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
pass=0
fail=0
log=$(mktemp)
for s in $suites; do
    case $s in
    checks)
        for c in check-deps check-fmt; do
            if make --no-print-directory -s "$c" >"$log" 2>&1; then
                pass=$((pass + 1))
                tail -n 1 "$log"
            else
                fail=$((fail + 1))
                tail -n 60 "$log"
                echo "FAIL $c"
            fi
        done
        ;;
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
    libfuzzer)
        fo=${FUZZ_O:-build/fuzz}
        secs=${FUZZ_SECS:-10}
        jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
        work=$(mktemp -d)
        names=""
        running=0
        started=$(date +%s)
        for src in tests/fuzz/fuzz_*.c; do
            n=$(basename "$src" .c)
            n=${n#fuzz_}
            names="$names $n"
            t="$fo/tests/fuzz/fuzz_$n"
            mkdir -p "$work/$n/corpus" "$fo/artifacts/$n"
            if [ ! -x "$t" ]; then echo 127 >"$work/$n/rc"; continue; fi
            cp tests/fuzz/corpus/"$n"/* "$work/$n/corpus/" 2>/dev/null
            # -timeout: one input running this long is a hang, reported like a crash
            ( "$t" -max_total_time="$secs" -timeout=25 -print_final_stats=1 \
                  -artifact_prefix="$fo/artifacts/$n/" "$work/$n/corpus" >"$work/$n/log" 2>&1
              echo $? >"$work/$n/rc" ) &
            running=$((running + 1))
            if [ "$running" -ge "$jobs" ]; then wait; running=0; fi
        done
        wait
        for n in $names; do
            rc=$(cat "$work/$n/rc")
            if [ "$rc" = 127 ] && [ ! -x "$fo/tests/fuzz/fuzz_$n" ]; then
                fail=$((fail + 1))
                echo "FAIL libfuzzer $n: $fo/tests/fuzz/fuzz_$n not built (make fuzz-build)"
                continue
            fi
            runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$n/log" | tail -n 1)
            if [ "$rc" = 0 ]; then
                pass=$((pass + 1))
                echo "libfuzzer $n: ok (${runs:-?} runs in ${secs} s)"
            else
                fail=$((fail + 1))
                tail -n 40 "$work/$n/log"
                crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$work/$n/log" | tail -n 1)
                echo "FAIL libfuzzer $n (exit $rc): input ${crash:-not written}"
                [ -n "$crash" ] && echo "  replay: $fo/tests/fuzz/fuzz_$n $crash"
            fi
        done
        echo "libfuzzer: $(echo $names | wc -w) targets, ${secs} s each, $(($(date +%s) - started)) s"
        rm -rf "$work"
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
