/* config.h — worldstated's settings from four places, over the flag table
 * (server/common/cli.h): a flag beats an environment variable, which beats
 * the config file, which beats the default.
 *
 *   flag   --max-batch 32  (or --max-batch=32)
 *   env    WORLDSTATE_MAX_BATCH=32   (prefix, the name upper-cased, '-' as '_')
 *   file   max-batch = 32            (INI, inih; max_batch works too; keys at the
 *                                     top or under [worldstated])
 *
 * The settings are the rows of the settings command (spec.settings bit) that
 * take a value; switches (--help, --version) are flags only. The file is the
 * one --config (or the environment's <PREFIX>CONFIG) names, else default_file
 * when it exists, else none. A bad file (unknown section or key, a bad value, a
 * line that is not `name = value`) is refused with FILE:LINE and the setting;
 * a bad environment value with the variable's name; unknown <PREFIX>* variables
 * are left alone (the clients read WORLDSTATE_URL and WORLDSTATE_API_KEY). */
#ifndef WS_SRV_CONFIG_H
#define WS_SRV_CONFIG_H

#include "server/common/cli.h"

#define WS_CONF_MAX_OPTS 64

typedef enum { WS_CONF_DEFAULT, WS_CONF_FILE, WS_CONF_ENV, WS_CONF_FLAG } ws_conf_source;

typedef struct {
    const char *prog; /* in messages */
    const ws_cli_opt *opts;
    int n_opts;
    unsigned cmd;             /* the command whose flags argv holds */
    unsigned settings;        /* the command whose rows the file and the environment may set */
    size_t size;              /* of the options struct */
    const char *config_flag;  /* the WS_OPT_STR row that names the file: "config" */
    const char *env_prefix;   /* "WORLDSTATE_" */
    const char *section;      /* the file's one named section: "worldstated" */
    const char *default_file; /* NULL: none */
} ws_conf_spec;

typedef struct {
    char file[4096];                        /* the file read; "" none */
    unsigned char source[WS_CONF_MAX_OPTS]; /* ws_conf_source of each row */
    char *text[WS_CONF_MAX_OPTS];           /* the text a row was set from; NULL: default */
    int first;                              /* argv index of the first operand */
    int usage_error;                        /* argv was wrong (the message went to stderr) */
} ws_conf;

/* Fills base (the options struct, holding the defaults) from the file, the
 * environment and argv, in that order, recording each row's source. On error
 * base may be half set; err says why (usage_error: argv's error was printed).
 * A WS_OPT_STR row set from the file or the environment points into c: keep c
 * while base is used, then ws_conf_free. */
ws_status ws_conf_load(const ws_conf_spec *spec, int argc, char **argv, void *base, ws_conf *c,
                       ws_error *err);
void ws_conf_free(ws_conf *c);

/* 1 when row k is a setting (file and environment may set it). */
int ws_conf_is_setting(const ws_conf_spec *spec, int k);
/* Row k's value in base as text: its number or string, the text it was set
 * from, or its help's "(default …)" for a parsed row left at its default. */
void ws_conf_value_text(const ws_conf_spec *spec, const ws_conf *c, const void *base, int k,
                        char *buf, size_t cap);
const char *ws_conf_source_name(ws_conf_source s);
/* The environment variable of a row's name ("max-batch" -> WORLDSTATE_MAX_BATCH). */
void ws_conf_env_name(const ws_conf_spec *spec, const char *name, char *buf, size_t cap);

#endif
