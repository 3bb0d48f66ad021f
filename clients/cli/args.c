/* args.c — option parsing shared by the subcommands: "--name value" or
 * "--name=value", positionals anywhere, "--" ends the options. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int set_value(const cli_opt *o, const char *v, const char *usage)
{
    char *end;
    errno = 0;
    switch (o->kind) {
    case CLI_STR: *(const char **)o->dst = v; return CLI_EXIT_OK;
    case CLI_INT: {
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno)
            return cli_usage(usage, "%s needs an integer, not \"%s\"", o->name, v);
        *(long long *)o->dst = x;
        return CLI_EXIT_OK;
    }
    case CLI_NUM: {
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x))
            return cli_usage(usage, "%s needs a number, not \"%s\"", o->name, v);
        *(double *)o->dst = x;
        return CLI_EXIT_OK;
    }
    case CLI_LIST: {
        cli_list *l = o->dst;
        const char **items = realloc(l->items, sizeof *items * (size_t)(l->n + 1));
        if (!items) return cli_usage(usage, "out of memory");
        items[l->n++] = v;
        l->items = items;
        return CLI_EXIT_OK;
    }
    case CLI_FLAG: break;
    }
    return cli_usage(usage, "%s takes no value", o->name);
}

static const cli_opt *find(const cli_opt *opts, const char *name, size_t len)
{
    for (const cli_opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len)) return o;
    return NULL;
}

int cli_parse(int argc, char **argv, const cli_opt *opts, const char **pos, int n_min, int n_max,
              int *n_pos, const char *usage)
{
    int np = 0, options = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (options && !strcmp(a, "--")) {
            options = 0;
            continue;
        }
        if (options && a[0] == '-' && a[1]) {
            const char *eq = strchr(a, '=');
            const cli_opt *o = find(opts, a, eq ? (size_t)(eq - a) : strlen(a));
            if (!o) return cli_usage(usage, "unknown option %s", a);
            if (o->kind == CLI_FLAG) {
                if (eq) return cli_usage(usage, "%s takes no value", o->name);
                *(int *)o->dst = 1;
                continue;
            }
            if (!eq && i + 1 == argc) return cli_usage(usage, "%s needs a value", o->name);
            int rc = set_value(o, eq ? eq + 1 : argv[++i], usage);
            if (rc != CLI_EXIT_OK) return rc;
            continue;
        }
        if (np == n_max) return cli_usage(usage, "unexpected argument \"%s\"", a);
        pos[np++] = a;
    }
    if (np < n_min) return cli_usage(usage, "missing argument");
    if (n_pos) *n_pos = np;
    return CLI_EXIT_OK;
}

void cli_opts_free(const cli_opt *opts)
{
    for (const cli_opt *o = opts; o->name; o++)
        if (o->kind == CLI_LIST) {
            cli_list *l = o->dst;
            free(l->items);
            l->items = NULL;
            l->n = 0;
        }
}
