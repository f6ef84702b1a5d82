/* msnap_out: the snapshot file sink, plain text or zstd.
 *
 * Lines are appended to a 256 KiB buffer.  When it fills (or on flush), the
 * buffer goes to the fd: as is in plain mode, or through a ZSTD streaming
 * compressor (ZSTD_compressStream2) in zstd mode.  msnap_out_flush uses
 * ZSTD_e_flush, which closes the current block, so every byte handed to
 * msnap_out_write before the flush can be decompressed from the file even if
 * the process dies right after; msnap_out_close uses ZSTD_e_end, which
 * finishes the frame (with a content checksum).
 *
 * Writes to the fd retry on EINTR and on short writes.  An error is sticky:
 * once a write to the fd failed, every later call fails with the same errno
 * (a snapshot with a hole in the middle is worse than a cut-off one).
 * Everything the sink allocates is allocated in msnap_out_fdopen, including
 * the compressor's workspace, so writing and flushing never allocate. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "memsnap/format.h"

#define OUT_BUF_SIZE ((size_t)256 << 10)

struct msnap_out {
    int fd;
    int err;            /* sticky errno, 0 when healthy */
    ZSTD_CCtx *cctx;    /* NULL in plain mode */
    char *buf;          /* pending text */
    size_t len;
    char *zbuf;         /* compressed output staging (zstd mode) */
    size_t zcap;
    uint64_t bytes;     /* bytes that reached the fd */
};

/* Writes all of p to the fd; 0 or -1 with errno (and o->err) set. */
static int write_all(msnap_out *o, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(o->fd, c, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            o->err = errno;
            return -1;
        }
        if (w == 0) {
            o->err = EIO;
            errno = EIO;
            return -1;
        }
        c += w;
        n -= (size_t)w;
        o->bytes += (uint64_t)w;
    }
    return 0;
}

/* Compresses src (may be empty) with the given directive and writes the
 * output; for flush/end, loops until zstd says the directive is complete. */
static int compress_out(msnap_out *o, const void *src, size_t n, ZSTD_EndDirective how)
{
    ZSTD_inBuffer in = {src, n, 0};
    for (;;) {
        ZSTD_outBuffer out = {o->zbuf, o->zcap, 0};
        size_t left = ZSTD_compressStream2(o->cctx, &out, &in, how);
        if (ZSTD_isError(left)) {
            o->err = EIO;
            errno = EIO;
            return -1;
        }
        if (out.pos && write_all(o, o->zbuf, out.pos) < 0)
            return -1;
        if (how == ZSTD_e_continue ? in.pos == in.size : left == 0)
            return 0;
    }
}

/* Sends the pending buffer on (raw or through the compressor). */
static int drain(msnap_out *o, ZSTD_EndDirective how)
{
    int rc;
    if (o->cctx)
        rc = compress_out(o, o->buf, o->len, how);
    else
        rc = o->len ? write_all(o, o->buf, o->len) : 0;
    if (rc == 0)
        o->len = 0;
    return rc;
}

/* Wraps fd (which the sink then owns).  zstd_level 0 = plain text, otherwise
 * a zstd level (1..19; 1-3 are the sensible ones for a live recorder).
 * Returns NULL with errno set (ENOMEM, EINVAL for a bad level). */
msnap_out *msnap_out_fdopen(int fd, int zstd_level)
{
    msnap_out *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->fd = fd;
    o->buf = malloc(OUT_BUF_SIZE);
    if (!o->buf)
        goto err;
    if (zstd_level > 0) {
        o->zcap = ZSTD_CStreamOutSize();
        o->zbuf = malloc(o->zcap);
        o->cctx = ZSTD_createCCtx();
        if (!o->zbuf || !o->cctx)
            goto err;
        if (ZSTD_isError(ZSTD_CCtx_setParameter(o->cctx, ZSTD_c_compressionLevel, zstd_level)) ||
            ZSTD_isError(ZSTD_CCtx_setParameter(o->cctx, ZSTD_c_checksumFlag, 1))) {
            errno = EINVAL;
            goto err;
        }
        /* Start the frame now so the workspace is allocated here, not on the
         * first write; with no input this produces no output. */
        ZSTD_inBuffer in = {NULL, 0, 0};
        ZSTD_outBuffer out = {o->zbuf, o->zcap, 0};
        if (ZSTD_isError(ZSTD_compressStream2(o->cctx, &out, &in, ZSTD_e_continue))) {
            errno = ENOMEM;
            goto err;
        }
        if (out.pos && write_all(o, o->zbuf, out.pos) < 0)
            goto err;
    }
    return o;
err:;
    int saved = errno;
    ZSTD_freeCCtx(o->cctx);
    free(o->zbuf);
    free(o->buf);
    free(o);
    errno = saved;
    return NULL;
}

/* Appends len bytes (normally whole lines).  0, or -1 with errno set. */
int msnap_out_write(msnap_out *o, const void *buf, size_t len)
{
    const char *p = buf;
    if (o->err) {
        errno = o->err;
        return -1;
    }
    while (len) {
        size_t room = OUT_BUF_SIZE - o->len;
        if (room == 0) {
            if (drain(o, ZSTD_e_continue) < 0)
                return -1;
            continue;
        }
        size_t n = len < room ? len : room;
        memcpy(o->buf + o->len, p, n);
        o->len += n;
        p += n;
        len -= n;
    }
    return 0;
}

/* Makes everything written so far readable from the file.  0 or -1. */
int msnap_out_flush(msnap_out *o)
{
    if (o->err) {
        errno = o->err;
        return -1;
    }
    return drain(o, ZSTD_e_flush);
}

/* Flushes, ends the zstd frame, closes the fd and frees o (always, even on
 * error).  0, or -1 with errno of the first failure. */
int msnap_out_close(msnap_out *o)
{
    int err = o->err;
    if (!err && drain(o, ZSTD_e_end) < 0)
        err = o->err;
    if (close(o->fd) < 0 && !err && errno != EINTR)
        err = errno;
    ZSTD_freeCCtx(o->cctx);
    free(o->zbuf);
    free(o->buf);
    free(o);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

/* Bytes that reached the fd so far (compressed bytes in zstd mode). */
uint64_t msnap_out_bytes(const msnap_out *o)
{
    return o->bytes;
}
