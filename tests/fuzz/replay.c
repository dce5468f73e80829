/* SPDX-License-Identifier: Apache-2.0 */
/* Replays fuzz inputs through one harness without libFuzzer, so that every build (gcc, the
 * sanitizers, a cross build under an emulator) runs the committed corpus through the contract
 * check: each argument is a file, or a directory whose files are fed in name order, once each.
 * A contract violation aborts (fz_fail), as it does under libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return 0;
    }
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *more = realloc(buf, cap *= 2);
            if (more == NULL) free(buf);
            buf = more;
        }
    }
    fclose(f);
    if (buf == NULL) {
        fprintf(stderr, "%s: out of memory\n", path);
        return 0;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 1;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir, int *inputs) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        perror(dir);
        return 0;
    }
    char **names = NULL;
    size_t count = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char **more = realloc(names, (count + 1) * sizeof *names);
        if (more == NULL) break;
        names = more;
        names[count] = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (names[count] == NULL) break;
        sprintf(names[count], "%s/%s", dir, e->d_name);
        count++;
    }
    closedir(d);
    qsort(names, count, sizeof *names, compare_names);
    int ok = 1;
    for (size_t i = 0; i < count; i++) {
        ok &= replay_file(names[i]);
        (*inputs)++;
        free(names[i]);
    }
    free(names);
    return ok;
}

int main(int argc, char **argv) {
    int inputs = 0, ok = 1;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            ok &= replay_dir(argv[i], &inputs);
        } else {
            ok &= replay_file(argv[i]);
            inputs++;
        }
    }
    printf("replayed %d inputs: every contract check held\n", inputs);
    return ok && inputs > 0 ? 0 : 1;
}
