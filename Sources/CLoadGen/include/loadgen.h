#ifndef LOADGEN_H
#define LOADGEN_H
#include <stddef.h>

/// Sends `count` datagrams (`payloads[i]`, `lengths[i]` bytes) on the connected UDP socket `fd`
/// with sendmmsg(2), in calls of at most 64. Returns how many were sent, or -errno if the first
/// call failed.
int loadgen_send(int fd, const void *const *payloads, const size_t *lengths, unsigned count);

#endif
