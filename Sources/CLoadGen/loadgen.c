#define _GNU_SOURCE
#include "loadgen.h"
#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>

int loadgen_send(int fd, const void *const *payloads, const size_t *lengths, unsigned count) {
    struct mmsghdr messages[64];
    struct iovec vectors[64];
    unsigned sent = 0;
    while (sent < count) {
        unsigned batch = count - sent < 64 ? count - sent : 64;
        for (unsigned i = 0; i < batch; i++) {
            vectors[i].iov_base = (void *)payloads[sent + i];
            vectors[i].iov_len = lengths[sent + i];
            messages[i].msg_hdr = (struct msghdr){.msg_iov = &vectors[i], .msg_iovlen = 1};
            messages[i].msg_len = 0;
        }
        int result = sendmmsg(fd, messages, batch, 0);
        if (result < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == ENOBUFS || errno == ECONNREFUSED) return (int)sent;
            return sent > 0 ? (int)sent : -errno;
        }
        sent += (unsigned)result;
    }
    return (int)sent;
}
