/* vocab.h — the per-model symbol vocabulary (DESIGN §2, Facts).
 *
 * Symbols (byte strings) map to ids 0..capacity-1 in order of first sight. Once
 * the vocabulary is full, further new symbols hash (FNV-1a) into one of
 * n_overflow buckets with ids capacity..capacity+n_overflow-1: never an error,
 * and the same symbol always gets the same id. */
#ifndef WS_VOCAB_H
#define WS_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "base/ws_status.h"

typedef struct ws_vocab ws_vocab;

/* A symbol as a batch takes it: its id (-1: none) and the hash of its bytes
 * (kernels/symcode.h; 0: take it from the vocabulary by id). */
typedef struct {
    int32_t id;
    uint64_t hash;
} ws_sym;

ws_status ws_vocab_new(ws_vocab **out, int capacity, int n_overflow);
/* What ws_vocab_new allocates for a capacity (the symbols' strings come later). */
size_t ws_vocab_bytes(int capacity);
void ws_vocab_free(ws_vocab *v);

/* The id of sym[0..len). add != 0 grows the vocabulary if sym is new and there
 * is room; add == 0 only looks up (a new symbol then gets its overflow id). */
int32_t ws_vocab_id(ws_vocab *v, const char *sym, size_t len, int add);
/* ws_vocab_id and the hash of the same bytes. */
ws_sym ws_vocab_sym(ws_vocab *v, const char *sym, size_t len, int add);
/* The hash of a named id's symbol; for an overflow or out-of-range id, a hash of
 * the id itself (a batch built from bare ids still gives each id one code). */
uint64_t ws_vocab_hash(const ws_vocab *v, int32_t id);
/* Forgets the symbols of ids n..size-1 (n <= size): what a vocabulary that
 * another process grew first must do before it takes that one's ids (the
 * engine on a shared store). Not while another thread reads those symbols. */
void ws_vocab_truncate(ws_vocab *v, int n);
/* Named symbols so far (<= capacity). */
int ws_vocab_size(const ws_vocab *v);
int ws_vocab_capacity(const ws_vocab *v);
int ws_vocab_n_overflow(const ws_vocab *v);
/* Symbol of a named id, or NULL for overflow/out-of-range ids. */
const char *ws_vocab_symbol(const ws_vocab *v, int32_t id);
/* The same without reading the size, for another thread than the one adding
 * symbols: id must be below a size that thread handed over (a symbol's string
 * and slot never change once added, and the table never moves). */
const char *ws_vocab_symbol_added(const ws_vocab *v, int32_t id);

#endif
