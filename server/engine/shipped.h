/* shipped.h — the default model's checkpoint, embedded in the engine (so in
 * worldstated) at build time from models/default.safetensors
 * (server/engine/CMakeLists.txt copies it beside the build on every build, so a
 * changed, new or removed file is picked up).
 * A fresh data directory's model "default" starts from these bytes. */
#ifndef WS_SRV_SHIPPED_H
#define WS_SRV_SHIPPED_H

#include <stddef.h>

/* The embedded checkpoint; *len = 0 when the build had none. */
const unsigned char *ws_srv_shipped_default(size_t *len);

#endif
