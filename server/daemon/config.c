/* config.c — settings from the config file (inih), the environment and the
 * flags (config.h). A row takes its value from the highest source that sets
 * it and from no other, so that a row whose parser adds to what it holds (a
 * repeatable flag such as --cors-origin) is not the sum of its sources; what a
 * lower source says of it is still checked, in a scratch copy. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const source_names[] = {"default", "file", "env", "flag"};

const char *ws_conf_source_name(ws_conf_source s)
{
    return s >= WS_CONF_DEFAULT && s <= WS_CONF_FLAG ? source_names[s] : "?";
}

int ws_conf_is_setting(const ws_conf_spec *spec, int k)
{
    const ws_cli_opt *o = &spec->opts[k];
    return (!o->only || (o->only & spec->settings)) && o->kind != WS_OPT_SET &&
           strcmp(o->name, spec->config_flag) != 0;
}

void ws_conf_env_name(const ws_conf_spec *spec, const char *name, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "%s%s", spec->env_prefix, name);
    for (size_t i = strlen(spec->env_prefix); i < n && i < cap; i++)
        buf[i] = buf[i] == '-' ? '_' : (char)toupper((unsigned char)buf[i]);
}

/* The settings row named `name` in a file ('_' taken as '-'); -1 if none. */
static int setting_row(const ws_conf_spec *spec, const char *name)
{
    char want[64];
    size_t n = strlen(name);
    if (n >= sizeof want) return -1;
    for (size_t i = 0; i <= n; i++) want[i] = name[i] == '_' ? '-' : name[i];
    for (int k = 0; k < spec->n_opts; k++)
        if (!strcmp(spec->opts[k].name, want) && ws_conf_is_setting(spec, k)) return k;
    return -1;
}

/* The sources above the file: which rows the flags and the environment set. */
typedef struct {
    const ws_conf_spec *spec;
    ws_conf *c;
    void *base;                         /* the options struct */
    void *scratch;                      /* where an overridden value is checked, then dropped */
    const char *flag[WS_CONF_MAX_OPTS]; /* the flag's (last) argument; NULL: not given */
    const char *env[WS_CONF_MAX_OPTS];  /* the variable's value; NULL: not set */
} layers;

/* Sets row k from the file or the environment: into base, recording the text
 * (a string row points at the copy in c) and source, unless a higher source
 * sets the row: then into scratch, only to check it. */
static ws_status set_row(layers *L, int k, const char *text, ws_conf_source from, const char *as,
                         ws_error *err)
{
    int over = L->flag[k] || (from == WS_CONF_FILE && L->env[k]);
    char *copy = strdup(text);
    if (!copy) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    ws_status s = ws_cli_set(&L->spec->opts[k], copy, over ? L->scratch : L->base, as, err);
    if (s != WS_OK || over) { /* scratch is dropped unread: its pointer may dangle */
        free(copy);
        return s;
    }
    free(L->c->text[k]);
    L->c->text[k] = copy;
    L->c->source[k] = (unsigned char)from;
    return WS_OK;
}

/* ---- the file ----------------------------------------------------------- */
typedef struct {
    FILE *f;
    int line;     /* of the text inih is parsing */
    int at_start; /* the next fgets begins a line */
    layers *L;
    int err_line; /* of the first error (0: none) */
    ws_error err;
} file_parse;

/* inih's reader: fgets that counts lines, so that a bad setting is reported
 * with its line (Debian's inih passes no line number to the handler). */
static char *read_line(char *str, int num, void *stream)
{
    file_parse *p = stream;
    char *s = fgets(str, num, p->f);
    if (!s) return NULL;
    size_t n = strlen(s);
    if (p->at_start) p->line++;
    p->at_start = n > 0 && s[n - 1] == '\n';
    if (!p->at_start && !feof(p->f) && !p->err_line) { /* inih would split it: refuse it */
        p->err_line = p->line;
        ws_error_set(&p->err, WS_ERR_INVALID, "a line longer than %d bytes", num - 2);
    }
    return s;
}

static int on_pair(void *user, const char *section, const char *name, const char *value)
{
    file_parse *p = user;
    const ws_conf_spec *spec = p->L->spec;
    if (p->err_line) return 1; /* the first error is the one reported */
    p->err_line = p->line;
    int k = setting_row(spec, name);
    if (section[0] && strcmp(section, spec->section) != 0)
        ws_error_set(&p->err, WS_ERR_INVALID,
                     "unknown section [%s] (settings go at the top or under [%s])", section,
                     spec->section);
    else if (k < 0)
        ws_error_set(&p->err, WS_ERR_INVALID,
                     "unknown setting '%s' (the settings are %s's flags without their dashes: "
                     "%s --help)",
                     name, spec->prog, spec->prog);
    else if (set_row(p->L, k, value, WS_CONF_FILE, name, &p->err) == WS_OK)
        p->err_line = 0;
    return p->err_line == 0;
}

static ws_status load_file(layers *L, ws_error *err)
{
    ws_conf *c = L->c;
    file_parse p = {.at_start = 1, .L = L};
    p.f = fopen(c->file, "r");
    if (!p.f)
        return ws_error_set(err, WS_ERR_IO, "cannot read config file %s: %s", c->file,
                            strerror(errno));
    /* `name = value` lines only: an indented line is not the value's
     * continuation, and a value ends at ';' (a comment) */
    ini_allow_multiline = false;
    int bad = ini_parse_stream(read_line, &p, on_pair, &p);
    int read_failed = ferror(p.f);
    fclose(p.f);
    if (read_failed) return ws_error_set(err, WS_ERR_IO, "cannot read config file %s", c->file);
    /* inih's line is the first it could not parse or we refused; ours names why */
    if (bad > 0 && (!p.err_line || bad < p.err_line))
        return ws_error_set(err, WS_ERR_INVALID, "%s:%d: not a `name = value` line or a [section]",
                            c->file, bad);
    if (p.err_line)
        return ws_error_set(err, p.err.code, "%s:%d: %s", c->file, p.err_line, p.err.msg);
    if (bad != 0) return ws_error_set(err, WS_ERR_IO, "cannot parse config file %s", c->file);
    return WS_OK;
}

/* ---- all four ------------------------------------------------------------ */
static int row_named(const ws_conf_spec *spec, const char *name)
{
    for (int k = 0; k < spec->n_opts; k++)
        if (!strcmp(spec->opts[k].name, name)) return k;
    return -1;
}

/* The file to read, into c->file: --config, the environment's, or the default
 * one when it exists. */
static ws_status pick_file(const ws_conf_spec *spec, const char *flag, ws_conf *c, ws_error *err)
{
    char env[96];
    ws_conf_env_name(spec, spec->config_flag, env, sizeof env);
    const char *path = flag ? flag : getenv(env);
    if (!path && spec->default_file && access(spec->default_file, F_OK) == 0)
        path = spec->default_file;
    if (!path) return WS_OK;
    if (!path[0] || strlen(path) >= sizeof c->file)
        return ws_error_set(err, WS_ERR_INVALID, "%s: not a file name: '%.64s'",
                            flag ? "--config" : env, path);
    snprintf(c->file, sizeof c->file, "%s", path);
    return WS_OK;
}

static ws_status load_layers(layers *L, int argc, char **argv, ws_error *err)
{
    const ws_conf_spec *spec = L->spec;
    ws_conf *c = L->c;
    /* argv first into scratch: its errors come first, it names the file, and
     * it says which rows the flags set */
    c->first = ws_cli_parse_given(argc, argv, spec->prog, spec->opts, spec->n_opts, spec->cmd,
                                  L->scratch, NULL, L->flag);
    if (c->first < 0) {
        c->usage_error = 1;
        return ws_error_set(err, WS_ERR_INVALID, "bad command line");
    }
    char env[96];
    for (int k = 0; k < spec->n_opts; k++) {
        ws_conf_env_name(spec, spec->opts[k].name, env, sizeof env);
        L->env[k] = ws_conf_is_setting(spec, k) ? getenv(env) : NULL;
    }
    int cfg = row_named(spec, spec->config_flag);
    WS_TRY(pick_file(spec, cfg >= 0 ? L->flag[cfg] : NULL, c, err));
    if (c->file[0]) WS_TRY(load_file(L, err));
    for (int k = 0; k < spec->n_opts; k++) {
        ws_conf_env_name(spec, spec->opts[k].name, env, sizeof env);
        if (L->env[k]) WS_TRY(set_row(L, k, L->env[k], WS_CONF_ENV, env, err));
    }
    /* the flags last, into base as a plain parse would set them (a repeated
     * flag adds up); the text kept is the last one's */
    c->first = ws_cli_parse_given(argc, argv, spec->prog, spec->opts, spec->n_opts, spec->cmd,
                                  L->base, NULL, L->flag);
    for (int k = 0; k < spec->n_opts; k++) {
        if (!L->flag[k]) continue;
        free(c->text[k]);
        if (!(c->text[k] = strdup(L->flag[k])))
            return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
        c->source[k] = WS_CONF_FLAG;
    }
    return WS_OK;
}

ws_status ws_conf_load(const ws_conf_spec *spec, int argc, char **argv, void *base, ws_conf *c,
                       ws_error *err)
{
    memset(c, 0, sizeof *c);
    if (spec->n_opts > WS_CONF_MAX_OPTS)
        return ws_error_set(err, WS_ERR_INVALID, "more than %d flags", WS_CONF_MAX_OPTS);
    layers L = {.spec = spec, .c = c, .base = base, .scratch = malloc(spec->size)};
    if (!L.scratch) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    memcpy(L.scratch, base, spec->size);
    ws_status s = load_layers(&L, argc, argv, err);
    free(L.scratch);
    return s;
}

void ws_conf_free(ws_conf *c)
{
    for (int k = 0; k < WS_CONF_MAX_OPTS; k++) {
        free(c->text[k]);
        c->text[k] = NULL;
    }
}

void ws_conf_value_text(const ws_conf_spec *spec, const ws_conf *c, const void *base, int k,
                        char *buf, size_t cap)
{
    const ws_cli_opt *o = &spec->opts[k];
    if (ws_cli_value_text(o, base, buf, cap)) return;
    if (c->text[k]) {
        snprintf(buf, cap, "%s", c->text[k]);
        return;
    }
    /* a parsed row at its default: its help says the default ("(default X)") */
    const char *d = strstr(o->help, "(default");
    if (!d) {
        snprintf(buf, cap, "-");
        return;
    }
    d += strlen("(default");
    d += strspn(d, ": ");
    size_t n = strcspn(d, ")");
    snprintf(buf, cap, "%.*s", (int)n, d);
}
