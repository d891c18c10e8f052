/* SPDX-License-Identifier: MIT
 * tests/fuzz/replay.c - runs a fuzz target over corpus files without libFuzzer.
 * `make test` links every tests/fuzz/fuzz_<target>.c with this file and feeds it
 * each file of tests/fuzz/corpus/<target>/, so the corpus is a regression suite.
 * Owns:    one file's bytes at a time.
 * Threads: single-threaded program.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
main(int argc, char **argv)
{
    int i;

    for (i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        uint8_t *buf;
        long n;

        if (!f) {
            perror(argv[i]);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        fseek(f, 0, SEEK_SET);
        buf = malloc(n > 0 ? (size_t)n : 1);
        if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
            fprintf(stderr, "%s: read failed\n", argv[i]);
            return 1;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(buf, (size_t)n);
        free(buf);
    }
    printf("replayed %d inputs\n", argc - 1);
    return 0;
}
