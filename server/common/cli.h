/* cli.h — a program's command-line flags as one table, parsed with getopt_long
 * (worldstated, worldstate-train and its offline commands). A row names a long
 * flag, where its value goes in the program's options struct, its range and a
 * line of help; ws_cli_usage prints one line per row. worldstate-train's model
 * flags are not rows: each field of ws_model_config_fields is a flag (the key
 * with dashes, its older alias, --no-key for a field in [0, 1]) with the
 * field's own range, so a config field added to the model is a flag here too.
 * --help shows each flag's default: the value it has in a struct of defaults,
 * read through the same offsets (a WS_OPT_FN row says its default in its help). */
#ifndef WS_SRV_CLI_H
#define WS_SRV_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "model/model.h"

typedef enum {
    WS_OPT_INT,    /* int in [lo, hi] */
    WS_OPT_LONG,   /* long in [lo, hi] */
    WS_OPT_I64,    /* int64_t in [lo, hi] */
    WS_OPT_U64,    /* uint64_t in [lo, hi] */
    WS_OPT_FLOAT,  /* float in [lo, hi] */
    WS_OPT_DOUBLE, /* double in [lo, hi] */
    WS_OPT_STR,    /* const char *: the argument itself */
    WS_OPT_SET,    /* takes no argument: the int becomes lo */
    WS_OPT_FN,     /* fn parses the argument into the value */
} ws_cli_kind;

typedef struct {
    const char *name; /* without the dashes */
    ws_cli_kind kind;
    size_t off; /* of the value in the options struct */
    double lo, hi;
    const char *arg;  /* how the usage names the argument ("N", "PATH"); NULL: none */
    const char *help; /* one line */
    ws_status (*fn)(void *value, const char *arg, ws_error *err); /* WS_OPT_FN */
    unsigned only; /* the commands (bits of the caller's choosing) that take it; 0: all */
} ws_cli_opt;

/* Parses the flags of argv[1..argc) (argv[0] names the command) into opts's
 * values in `base`, and the model flags into *mc when mc is not NULL; rows whose
 * `only` leaves out `cmd` are unknown flags. Returns the index in argv of the
 * first operand (getopt_long moves operands after the flags; argc: none), or -1
 * after printing why to stderr, prefixed by `prog`. */
int ws_cli_parse(int argc, char **argv, const char *prog, const ws_cli_opt *opts, int n_opts,
                 unsigned cmd, void *base, ws_model_config *mc);

/* ws_cli_parse that also sets given[k] to the argument of each row k given
 * ("" for a switch; given: n_opts pointers, NULL-filled by the caller, or
 * NULL): where a setting came from, and the text it was set from. */
int ws_cli_parse_given(int argc, char **argv, const char *prog, const ws_cli_opt *opts, int n_opts,
                       unsigned cmd, void *base, ws_model_config *mc, const char **given);
/* Sets o's value in base from its text, as the flag would (a config file and
 * the environment use the same rows); `as` names it in the message. */
ws_status ws_cli_set(const ws_cli_opt *o, const char *arg, void *base, const char *as,
                     ws_error *err);

/* One line per flag of cmd (~0u: of every command), ending "(default V)" with
 * its value in `defaults` (an options struct as the program starts with it; NULL:
 * none shown) unless its help says "(default ...)" itself. One line per model field, with its value in mc (NULL: none). */
void ws_cli_usage(FILE *f, const ws_cli_opt *opts, int n_opts, unsigned cmd, const void *defaults);
void ws_cli_model_usage(FILE *f, const ws_model_config *mc);
/* The value of o in base as text; 0 when it has none to show (a switch, a
 * parsed argument, an unset string). */
int ws_cli_value_text(const ws_cli_opt *o, const void *base, char *buf, size_t cap);

#endif
