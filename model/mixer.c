/* mixer.c — the registry of mixers by kind (mixer.h), built from
 * mixer_list.h: a mixer joins by its line there. */
#include "mixer.h"

/* Each role's registry entry type, so that one line of mixer_list.h declares
 * ws_<role>_<name> with its type. */
typedef ws_mixer ws_role_mixer;
typedef ws_updater_variant ws_role_updater;
typedef ws_readout_variant ws_role_readout;
enum { ROLE_mixer, ROLE_updater, ROLE_readout };

#define WS_MIXER(KIND, name, role) extern const ws_role_##role ws_##role##_##name;
#include "mixer_list.h"
#undef WS_MIXER

static const struct {
    int kind, role;
    const void *impl;
} registry[] = {
#define WS_MIXER(KIND, name, role) {WS_MIXER_##KIND, ROLE_##role, &ws_##role##_##name},
#include "mixer_list.h"
#undef WS_MIXER
};

static const void *find(int kind, int role)
{
    for (size_t i = 0; i < sizeof registry / sizeof *registry; i++)
        if (registry[i].kind == kind && registry[i].role == role) return registry[i].impl;
    return NULL;
}

const ws_mixer *ws_mixer_find(int kind)
{
    return find(kind, ROLE_mixer);
}
const ws_updater_variant *ws_updater_variant_find(int kind)
{
    return find(kind, ROLE_updater);
}
const ws_readout_variant *ws_readout_variant_find(int kind)
{
    return find(kind, ROLE_readout);
}
