/* recall.c — see recall.h. */
#include "recall.h"

#include <string.h>

#include "base/ws_rng.h"

int ws_recall_find(const ws_recall_facts *f, int S, const int32_t *ids, const uint64_t *hash)
{
    static const uint64_t none[WS_MAX_FACT_LEN];
    if (!hash) hash = none;
    for (int i = 0; i < f->n; i++)
        if (!memcmp(f->ids[i], ids, sizeof(int32_t) * (size_t)S) &&
            !memcmp(f->hash[i], hash, sizeof(uint64_t) * (size_t)S))
            return i;
    return -1;
}

/* Drops fact i, the newer ones moving down. */
static void drop(ws_recall_facts *f, int i)
{
    int after = f->n - i - 1;
    memmove(&f->ids[i], &f->ids[i + 1], sizeof f->ids[0] * (size_t)after);
    memmove(&f->hash[i], &f->hash[i + 1], sizeof f->hash[0] * (size_t)after);
    memmove(&f->val[i], &f->val[i + 1], (size_t)after);
    f->n--;
}

void ws_recall_tell(ws_recall_facts *f, int S, const int32_t *ids, const uint64_t *hash, int val)
{
    int i = ws_recall_find(f, S, ids, hash);
    if (i >= 0) drop(f, i);                  /* overridden: it moves to the newest slot */
    if (f->n == WS_RECALL_FACTS) drop(f, 0); /* forget the oldest fact */
    memset(f->ids[f->n], 0xff, sizeof f->ids[0]);
    memset(f->hash[f->n], 0, sizeof f->hash[0]);
    memcpy(f->ids[f->n], ids, sizeof(int32_t) * (size_t)S);
    if (hash) memcpy(f->hash[f->n], hash, sizeof(uint64_t) * (size_t)S);
    f->val[f->n++] = (int8_t)val;
}

int ws_recall_closed(const ws_recall_facts *f, int S, const int32_t *ids, const uint64_t *hash,
                     int complete)
{
    int k = ws_recall_find(f, S, ids, hash);
    return k >= 0 ? f->val[k] : complete ? 0 : -1;
}

int ws_recall_draw(const ws_recall_facts *f, uint64_t *rng)
{
    return (int)(ws_xorshift64(rng) % (uint64_t)f->n);
}

int ws_recall_syms(const ws_recall_facts *f, int k, int S, ws_sym *out)
{
    int n = 0;
    while (n < S && (f->ids[k][n] >= 0 || f->hash[k][n])) {
        out[n] = (ws_sym){f->ids[k][n], f->hash[k][n]};
        n++;
    }
    return n;
}
