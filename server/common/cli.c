/* cli.c — flags from a table through getopt_long (cli.h). */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* getopt_long's `val` of a row, of a model field's flag, of its --no- form. */
enum { VAL_OPT = 0x100, VAL_FIELD = 0x200, VAL_NO_FIELD = 0x300 };
/* A program's rows, then each model field: its key with dashes, its alias, and
 * the --no- form of both. */
#define MAX_OPTS     0x100
#define MAX_LONGOPTS (MAX_OPTS + 4 * WS_MODEL_CONFIG_N_FIELDS)

typedef struct {
    char name[4][40]; /* key with dashes, alias, no-key, no-alias ("": none) */
} field_flags;

static void field_flags_of(int i, field_flags *ff)
{
    const ws_model_config_field *f = &ws_model_config_fields[i];
    memset(ff, 0, sizeof *ff);
    for (size_t k = 0; f->key[k] && k + 1 < sizeof ff->name[0]; k++)
        ff->name[0][k] = f->key[k] == '_' ? '-' : f->key[k];
    if (f->alias) snprintf(ff->name[1], sizeof ff->name[1], "%s", f->alias);
    if (f->type != WS_CFG_INT || f->lo != 0 || f->hi != 1) return;
    for (int k = 0; k < 2; k++)
        if (ff->name[k][0])
            snprintf(ff->name[2 + k], sizeof ff->name[2 + k], "no-%.36s", ff->name[k]);
}

static int takes(const ws_cli_opt *o, unsigned cmd)
{
    return !o->only || (o->only & cmd);
}

ws_status ws_cli_set(const ws_cli_opt *o, const char *arg, void *base, const char *as,
                     ws_error *err)
{
    void *v = (char *)base + o->off;
    char *end = NULL;
    errno = 0;
    if (o->kind == WS_OPT_STR) {
        *(const char **)v = arg;
    } else if (o->kind == WS_OPT_SET) {
        *(int *)v = (int)o->lo;
    } else if (o->kind == WS_OPT_FN) {
        ws_error e = {0};
        if (o->fn(v, arg, &e) != WS_OK) return ws_error_set(err, e.code, "%s: %s", as, e.msg);
    } else if (o->kind == WS_OPT_U64) {
        /* strtoull, not strtod: a seed keeps all its 64 bits */
        unsigned long long x = strtoull(arg, &end, 10);
        if (!*arg || *arg == '-' || *end || errno || (double)x < o->lo || (double)x > o->hi)
            return ws_error_set(err, WS_ERR_INVALID,
                                "%s wants an integer in [%.0f, %.0f], got '%s'", as, o->lo, o->hi,
                                arg);
        *(uint64_t *)v = x;
    } else {
        double x = strtod(arg, &end);
        int integral = o->kind != WS_OPT_FLOAT && o->kind != WS_OPT_DOUBLE;
        if (!*arg || *end || errno || !(x >= o->lo && x <= o->hi) || (integral && x != floor(x)))
            return ws_error_set(err, WS_ERR_INVALID,
                                integral ? "%s wants an integer in [%.0f, %.0f], got '%s'"
                                         : "%s wants a number in [%g, %g], got '%s'",
                                as, o->lo, o->hi, arg);
        switch (o->kind) {
        case WS_OPT_INT: *(int *)v = (int)x; break;
        case WS_OPT_LONG: *(long *)v = (long)x; break;
        case WS_OPT_I64: *(int64_t *)v = (int64_t)x; break;
        case WS_OPT_FLOAT: *(float *)v = (float)x; break;
        default: *(double *)v = x; break;
        }
    }
    return WS_OK;
}

/* The getopt_long table of cmd's rows and, with model, the model fields' flags
 * (names kept in ff), ended by a zero entry. */
static void long_options(const ws_cli_opt *opts, int n_opts, unsigned cmd, int model,
                         field_flags *ff, struct option *lo)
{
    int n = 0;
    for (int k = 0; k < n_opts; k++)
        if (takes(&opts[k], cmd))
            lo[n++] = (struct option){opts[k].name,
                                      opts[k].kind == WS_OPT_SET ? no_argument : required_argument,
                                      NULL, VAL_OPT + k};
    for (int i = 0; model && i < WS_MODEL_CONFIG_N_FIELDS; i++) {
        field_flags_of(i, &ff[i]);
        for (int k = 0; k < 4; k++)
            if (ff[i].name[k][0])
                lo[n++] = (struct option){ff[i].name[k], k < 2 ? required_argument : no_argument,
                                          NULL, (k < 2 ? VAL_FIELD : VAL_NO_FIELD) + i};
    }
    lo[n] = (struct option){0};
}

int ws_cli_parse(int argc, char **argv, const char *prog, const ws_cli_opt *opts, int n_opts,
                 unsigned cmd, void *base, ws_model_config *mc)
{
    return ws_cli_parse_given(argc, argv, prog, opts, n_opts, cmd, base, mc, NULL);
}

int ws_cli_parse_given(int argc, char **argv, const char *prog, const ws_cli_opt *opts, int n_opts,
                       unsigned cmd, void *base, ws_model_config *mc, const char **given)
{
    if (n_opts > MAX_OPTS) {
        fprintf(stderr, "%s: a table of more than %d flags\n", prog, MAX_OPTS);
        return -1;
    }
    field_flags ff[WS_MODEL_CONFIG_N_FIELDS];
    struct option lo[MAX_LONGOPTS + 1];
    long_options(opts, n_opts, cmd, mc != NULL, ff, lo);
    optind = 0; /* glibc: start afresh (a program or test may parse more than once) */
    opterr = 0; /* the messages below name the program, not argv[0] */
    int c, idx;
    while ((c = getopt_long(argc, argv, ":", lo, &idx)) != -1) {
        if (c == ':' || c == '?') {
            fprintf(stderr, "%s: %s '%s'\n", prog,
                    c == ':' ? "a value is missing after" : "unknown option", argv[optind - 1]);
            return -1;
        }
        ws_error err = {0};
        char as[48];
        snprintf(as, sizeof as, "--%s", lo[idx].name);
        if (c < VAL_FIELD) {
            if (ws_cli_set(&opts[c - VAL_OPT], optarg, base, as, &err) != WS_OK) {
                fprintf(stderr, "%s: %s\n", prog, err.msg);
                return -1;
            }
            if (given) given[c - VAL_OPT] = optarg ? optarg : "";
        } else if (c >= VAL_NO_FIELD) {
            ws_model_config_set(mc, c - VAL_NO_FIELD, 0);
        } else if (ws_model_config_parse(mc, c - VAL_FIELD, optarg, as, &err) != WS_OK) {
            fprintf(stderr, "%s: %s\n", prog, err.msg);
            return -1;
        }
    }
    return optind;
}

static void usage_line(FILE *f, const char *flag, const char *help, const char *def)
{
    fprintf(f, "  %-32s %s%s%s%s\n", flag, help, def ? " (default " : "", def ? def : "",
            def ? ")" : "");
}

int ws_cli_value_text(const ws_cli_opt *o, const void *base, char *buf, size_t cap)
{
    const void *v = (const char *)base + o->off;
    switch (o->kind) {
    case WS_OPT_INT: snprintf(buf, cap, "%d", *(const int *)v); return 1;
    case WS_OPT_LONG: snprintf(buf, cap, "%ld", *(const long *)v); return 1;
    case WS_OPT_I64: snprintf(buf, cap, "%lld", (long long)*(const int64_t *)v); return 1;
    case WS_OPT_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)v); return 1;
    case WS_OPT_FLOAT: snprintf(buf, cap, "%g", (double)*(const float *)v); return 1;
    case WS_OPT_DOUBLE: snprintf(buf, cap, "%g", *(const double *)v); return 1;
    case WS_OPT_STR:
        if (!*(const char *const *)v) return 0;
        snprintf(buf, cap, "%s", *(const char *const *)v);
        return 1;
    default: return 0; /* WS_OPT_SET, WS_OPT_FN */
    }
}

void ws_cli_model_usage(FILE *f, const ws_model_config *mc)
{
    for (int i = 0; i < WS_MODEL_CONFIG_N_FIELDS; i++) {
        const ws_model_config_field *fd = &ws_model_config_fields[i];
        field_flags ff;
        field_flags_of(i, &ff);
        char flag[160], help[160] = "", def[64] = "";
        /* The older alias first: it is the spelling scripts and docs use. */
        int a = ff.name[1][0] ? 1 : 0;
        snprintf(flag, sizeof flag, "--%s %s%s%s%s%s", ff.name[a],
                 fd->type == WS_CFG_NAME    ? "NAME"
                 : fd->type == WS_CFG_FLOAT ? "X"
                                            : "N",
                 a ? ", --" : "", a ? ff.name[0] : "", ff.name[2 + a][0] ? ", --" : "",
                 ff.name[2 + a]);
        snprintf(help, sizeof help, "%s: ", fd->key);
        if (fd->type == WS_CFG_NAME) {
            for (int k = 0; k < fd->n_names; k++)
                snprintf(help + strlen(help), sizeof help - strlen(help), "%s%s", k ? "|" : "",
                         fd->names[k]);
        } else {
            snprintf(help + strlen(help), sizeof help - strlen(help),
                     fd->type == WS_CFG_FLOAT ? "(%g, %g]" : "[%.0f, %.0f]", fd->lo, fd->hi);
        }
        double v = mc ? ws_model_config_get(mc, i) : 0;
        if (mc && fd->type == WS_CFG_NAME)
            snprintf(def, sizeof def, "%s", fd->names[(int)v]);
        else if (mc)
            snprintf(def, sizeof def, "%g", v);
        usage_line(f, flag, help, mc ? def : NULL);
    }
}

void ws_cli_usage(FILE *f, const ws_cli_opt *opts, int n_opts, unsigned cmd, const void *defaults)
{
    for (int k = 0; k < n_opts; k++) {
        if (!takes(&opts[k], cmd)) continue;
        char flag[64], def[64];
        snprintf(flag, sizeof flag, "--%s%s%s", opts[k].name, opts[k].arg ? " " : "",
                 opts[k].arg ? opts[k].arg : "");
        /* a help that says "(default ...)" itself knows better (-1: the model's) */
        int shown = defaults && !strstr(opts[k].help, "(default") &&
                    ws_cli_value_text(&opts[k], defaults, def, sizeof def);
        usage_line(f, flag, opts[k].help, shown ? def : NULL);
    }
}
