/* mixer.c — the registry of mixers by kind (mixer.h). A mixer joins by adding
 * its table here. */
#include "mixer.h"

extern const ws_mixer ws_mixer_mha;
extern const ws_readout_variant ws_readout_rn;
extern const ws_mixer ws_mixer_simplicial2;
extern const ws_mixer ws_mixer_compositional;
extern const ws_updater_variant ws_updater_rmc;

static const ws_mixer *const block_mixers[] = {&ws_mixer_mha, &ws_mixer_simplicial2,
                                               &ws_mixer_compositional};
static const ws_updater_variant *const updater_variants[] = {&ws_updater_rmc};
static const ws_readout_variant *const readout_variants[] = {&ws_readout_rn};

#define FIND(table, kind)                                                  \
    for (size_t i = 0; i < sizeof(table) / sizeof((table)[0]); i++)       \
        if ((table)[i] && (table)[i]->kind == (kind)) return (table)[i];  \
    return NULL

const ws_mixer *ws_mixer_find(int kind) { FIND(block_mixers, kind); }
const ws_updater_variant *ws_updater_variant_find(int kind) { FIND(updater_variants, kind); }
const ws_readout_variant *ws_readout_variant_find(int kind) { FIND(readout_variants, kind); }
