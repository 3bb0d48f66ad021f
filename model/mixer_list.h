/* mixer_list.h — the registry of mixers (../shared/MIXERS.md): one line each,
 * WS_MIXER(KIND, name, role), in ws_mixer_kind order. KIND gives WS_MIXER_KIND
 * (model.h), name the config's string and the symbol ws_<role>_<name> that the
 * mixer's own file defines; role says which registry of mixer.h it joins:
 * mixer (a ws_mixer for any block), updater (a ws_updater_variant) or readout
 * (a ws_readout_variant). A new mixer is its file plus its line here. No
 * include guard: the includer defines WS_MIXER first. */
/* clang-format off */
WS_MIXER(MHA, mha, mixer)                     /* multi-head dot-product attention (default) */
WS_MIXER(SIMPLICIAL2, simplicial2, mixer)     /* 2-simplicial attention with virtual entities */
WS_MIXER(COMPOSITIONAL, compositional, mixer) /* searches x retrievals */
WS_MIXER(RMC, rmc, updater)                   /* Updater only: gated relational memory core */
WS_MIXER(RN, rn, readout)                     /* Extractor only: relation-network readout */
/* clang-format on */
