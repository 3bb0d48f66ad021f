/* ws_thread_name.c — see ws_thread_name.h. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "ws_thread_name.h"

#include <pthread.h>
#include <string.h>

void ws_thread_name(const char *name)
{
    char cut[16];
    strncpy(cut, name, sizeof cut - 1);
    cut[sizeof cut - 1] = '\0';
    (void)pthread_setname_np(pthread_self(), cut);
}
