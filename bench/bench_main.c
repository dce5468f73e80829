/* SPDX-License-Identifier: Apache-2.0 */
/* gradref-bench: times each problem of problems/problems.txt (or the file given) and, in the same
 * run, a plain memory copy of the same number of bytes, so figures from different machines can
 * be read as a fraction of what the memory system gives.
 *
 *   gradref-bench [-t threads] [-r repeats] [-f problems.txt] [--isa level]
 *                 [--onednn-plain | --onednn-layouts] [--csv] [substring]
 *
 * level: portable, avx2, avx512 or avx512_vnni on x86; portable, neon or neon_dot on aarch64.
 * Operators with a workspace are timed twice: with a caller workspace (allocated once, as a
 * training loop would) and with a NULL one (the call allocates it each time: what a caller
 * gets by default). --isa caps gradref's kernels (GRADREF_MAX_ISA) and, on x86, oneDNN's
 * (ONEDNN_MAX_CPU_ISA) alike: the program runs itself again with both set, and the header
 * (and the CSV's peer_isa column) names the level oneDNN says it ran at. oneDNN, the
 * convolutions' peer, works in the memory formats it picks (its fastest setting); with
 * --onednn-plain it takes the operator's layouts instead and its time includes its reorders
 * to and from its own formats (what a caller holding NCHW tensors pays); with
 * --onednn-layouts its convolution itself takes the activations in the operator's layouts (its
 * weights still in its own format, packed once outside the timing), no reorders: the
 * implementation oneDNN has for those layouts, or its reference loop (ONEDNN_VERBOSE names it).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "bench.h"
#include "bench_ops.h"

/* The levels --isa takes on this architecture, each with oneDNN's cap of the same width (NULL:
 * none: aarch64's oneDNN levels are SVE widths, not NEON's). */
typedef struct isa_cap {
    const char *level, *onednn;
} isa_cap;
#if defined(__aarch64__)
static const isa_cap isa_caps[] = {{"portable", NULL}, {"neon", NULL}, {"neon_dot", NULL}};
#else
static const isa_cap isa_caps[] = {{"portable", "SSE41"},
                                   {"avx2", "AVX2"},
                                   {"avx512", "AVX512_CORE"},
                                   {"avx512_vnni", "AVX512_CORE_VNNI"}};
#endif
#define ISA_CAPS (sizeof isa_caps / sizeof isa_caps[0])

static void usage(void) {
    fprintf(stderr, "usage: gradref-bench [-t threads] [-r repeats] [-f problems.txt] [--isa ");
    for (size_t i = 0; i < ISA_CAPS; i++)
        fprintf(stderr, "%s%s", i ? "|" : "", isa_caps[i].level);
    fprintf(stderr, "] [--onednn-plain | --onednn-layouts] [--csv] [substring]\n");
}

/* --isa: runs this program again with GRADREF_MAX_ISA and oneDNN's ONEDNN_MAX_CPU_ISA set
 * (both are read when the libraries load). Returns only on an error. */
static int rerun_with_isa(const char *isa, char **argv) {
    const isa_cap *cap = NULL;
    for (size_t i = 0; i < ISA_CAPS; i++)
        if (strcmp(isa, isa_caps[i].level) == 0) cap = &isa_caps[i];
    if (cap == NULL) {
        fprintf(stderr, "gradref-bench: --isa %s: use", isa);
        for (size_t i = 0; i < ISA_CAPS; i++)
            fprintf(stderr, "%s %s",
                    i == 0              ? ""
                    : i + 1 == ISA_CAPS ? " or"
                                        : ",",
                    isa_caps[i].level);
        fputc('\n', stderr);
        return 2;
    }
    /* the child has both caps; a caller's GRADREF_MAX_ISA alone still needs oneDNN's set */
    const char *set = getenv("GRADREF_MAX_ISA"), *peer = getenv("ONEDNN_MAX_CPU_ISA");
    if (set && strcmp(set, isa) == 0 && (!cap->onednn || (peer && strcmp(peer, cap->onednn) == 0)))
        return 0;
    setenv("GRADREF_MAX_ISA", isa, 1);
    if (cap->onednn) setenv("ONEDNN_MAX_CPU_ISA", cap->onednn, 1);
    execv("/proc/self/exe", argv);
    perror("gradref-bench: execv");
    return 2;
}

/* The value of /proc/cpuinfo's line `line` when it starts with key, trimmed, into out. */
static int cpuinfo_value(const char *line, const char *key, char *out, size_t size) {
    if (strncmp(line, key, strlen(key)) != 0) return 0;
    const char *v = strchr(line, ':');
    if (!v) return 0;
    v++;
    while (*v == ' ')
        v++;
    snprintf(out, size, "%s", v);
    out[strcspn(out, "\n,")] = 0;
    return 1;
}

/* The CPU's model name (for the header and the CSV's machine column); on aarch64, whose
 * cpuinfo has none, its implementer and part codes (Kunpeng 920: 0x48, 0xd01). */
static void cpu_name(char *out, size_t size) {
    snprintf(out, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512], implementer[32] = "", part[32] = "";
    while (fgets(line, sizeof line, f)) {
        if (cpuinfo_value(line, "model name", out, size)) break;
        if (!implementer[0])
            cpuinfo_value(line, "CPU implementer", implementer, sizeof implementer);
        if (!part[0]) cpuinfo_value(line, "CPU part", part, sizeof part);
    }
    fclose(f);
    if (strcmp(out, "unknown") == 0 && implementer[0] && part[0])
        snprintf(out, size, "aarch64 implementer %s part %s", implementer, part);
}

static int run_problem(const problem *p, int threads, int repeats, timing *t) {
    if (strcmp(p->op, "recat") == 0) return bench_recat(p, threads, repeats, t);
    if (strcmp(p->op, "rope") == 0) return bench_rope(p, threads, repeats, t);
    if (strcmp(p->op, "grid_sampler3d_grad") == 0) return bench_gs3d(p, threads, repeats, t);
    if (strcmp(p->op, "conv_backprop_data") == 0) return bench_cbd(p, threads, repeats, t);
    if (strcmp(p->op, "conv3d_backprop_filter") == 0) return bench_c3f(p, threads, repeats, t);
    fprintf(stderr, "gradref-bench: unknown operator '%s'\n", p->op);
    return 1;
}

int main(int argc, char **argv) {
    int threads = 0, repeats = 11, csv = 0;
    const char *path = GRADREF_PROBLEMS, *filter = NULL, *isa = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (strcmp(argv[i], "-f") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc)
            isa = argv[++i];
        else if (strcmp(argv[i], "--csv") == 0)
            csv = 1;
        else if (strcmp(argv[i], "--onednn-plain") == 0)
            bench_onednn_plain = PEER_PLAIN_REORDERS;
        else if (strcmp(argv[i], "--onednn-layouts") == 0)
            bench_onednn_plain = PEER_PLAIN_LAYOUTS;
        else if (argv[i][0] == '-') {
            usage();
            return 2;
        } else
            filter = argv[i];
    }
    if (isa) {
        const int rc = rerun_with_isa(isa, argv);
        if (rc) return rc;
    }
    if (repeats < 1) repeats = 1;
#ifdef _OPENMP
    if (threads <= 0) threads = omp_get_max_threads();
    /* the workspace twins size per-thread parts for the default thread count: make it -t */
    omp_set_num_threads(threads);
#else
    threads = 1;
#endif
    char err[256], machine[128];
    cpu_name(machine, sizeof machine);
    problem *list;
    int n = problem_load(path, &list, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "gradref-bench: %s\n", err);
        return 2;
    }
    const char *level = isa ? isa : "widest";
    if (csv) {
        printf("machine,isa,threads,operator,problem,ms,ms_null_workspace,workspace_bytes,rate,"
               "unit,baseline,ratio,peer_isa\n");
    } else {
        printf("gradref %s on %s, %d thread(s), ISA %s (oneDNN at %s), median of %d runs\n",
               gradref_version(), machine, threads, level, peer_onednn_isa(), repeats);
        printf("%-58s %9s %9s %8s %9s %-7s %9s %6s\n", "problem", "ms", "ms NULL", "ws MiB", "rate",
               "unit", "baseline", "ratio");
        printf("(ms NULL: a NULL workspace; baseline: same-run copy GB/s for data movers, "
               "oneDNN for convolutions%s)\n",
               bench_onednn_plain == PEER_PLAIN_REORDERS
                   ? " on the operators' layouts, its reorders included"
               : bench_onednn_plain == PEER_PLAIN_LAYOUTS
                   ? " in the operators' layouts, no reorders"
                   : "");
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        const problem *p = &list[i];
        if (filter && !strstr(p->text, filter)) continue;
        timing t;
        memset(&t, 0, sizeof t);
        if (run_problem(p, threads, repeats, &t)) {
            failed = 1;
            continue;
        }
        if (t.null_ws_seconds == 0) t.null_ws_seconds = t.op_seconds; /* no workspace */
        double rate, base = 0;
        const char *unit;
        if (t.work > 0) { /* compute-bound: a rate, and the same-run peer's when there is one */
            rate = t.work / t.op_seconds * t.unit_scale;
            unit = t.unit;
            if (t.peer_seconds > 0) base = t.work / t.peer_seconds * t.unit_scale;
        } else {
            rate = t.bytes_moved / t.op_seconds * 1e-9;
            unit = "GB/s";
            base = t.bytes_moved / t.copy_seconds * 1e-9;
        }
        if (csv) {
            printf("\"%s\",%s,%d,%s,\"%s\",%.4f,%.4f,%zu,%.4f,%s,%.4f,%.4f,%s\n", machine, level,
                   threads, p->op, p->text, t.op_seconds * 1e3, t.null_ws_seconds * 1e3,
                   t.workspace_bytes, rate, unit, base, base > 0 ? rate / base : 0.0,
                   t.peer_seconds > 0 ? peer_onednn_isa() : "");
        } else if (base > 0) {
            printf("%-58s %9.3f %9.3f %8.1f %9.2f %-7s %9.2f %6.2f\n", p->text, t.op_seconds * 1e3,
                   t.null_ws_seconds * 1e3, (double)t.workspace_bytes / 1048576.0, rate, unit, base,
                   rate / base);
        } else {
            printf("%-58s %9.3f %9.3f %8.1f %9.2f %-7s\n", p->text, t.op_seconds * 1e3,
                   t.null_ws_seconds * 1e3, (double)t.workspace_bytes / 1048576.0, rate, unit);
        }
        fflush(stdout);
    }
    free(list);
    return failed;
}
