/*
 * fake_v4l2.c - a V4L2 webcam emulated in user space, loaded with LD_PRELOAD.
 *
 * Machines without a camera (or without media support in the kernel) cannot have a
 * /dev/videoN.  This library makes one path look like a V4L2 capture device to the
 * process it is preloaded into, so that a program's real V4L2 code (here FFmpeg's
 * libavdevice "video4linux2,v4l2" demuxer) runs end to end against it.
 *
 * Build:  gcc -shared -fPIC -O2 -o fake_v4l2.so fake_v4l2.c -ldl
 * Use:    LD_PRELOAD=/path/fake_v4l2.so FAKE_V4L2_DEVICE=/dev/video42 ... program
 *
 * Environment (read once, at the first call that needs it):
 *   FAKE_V4L2_DEVICE   path to emulate, e.g. /dev/video42 (unset: the library does nothing)
 *   FAKE_V4L2_FRAMES   file of raw YUYV 4:2:2 frames, W*H*2 bytes each, played in a loop
 *   FAKE_V4L2_SIZE     WxH of those frames, e.g. 480x270 (W even)
 *   FAKE_V4L2_FPS      frame rate, default 10 (decimals allowed, e.g. 12.5)
 *   FAKE_V4L2_PLUGGED  optional path of a marker file: the camera is plugged in while
 *                      that file exists.  Removing it unplugs the camera: open() of the
 *                      device fails with ENOENT, and every ioctl on a descriptor opened
 *                      before fails with ENODEV (as after a USB disconnect, for good).
 *                      Creating the file again plugs in a new camera; a descriptor of
 *                      the old one stays dead.  Any change of the file's inode or ctime
 *                      (remove + create, touch) counts as unplug + replug.
 *   FAKE_V4L2_TRACE    1: one line on stderr per ioctl on the device (name and result)
 *
 * What is emulated, per open descriptor of the device:
 *   open/open64/openat/openat64 of exactly FAKE_V4L2_DEVICE return a real descriptor: a
 *   memfd whose pages are the capture buffers, so close and fcntl behave as on any
 *   descriptor (a dup of it is not the device, though).  O_NONBLOCK is honoured, also
 *   when set later with fcntl(F_SETFL).  Every other path passes through untouched.
 *   ioctl:  QUERYCAP (VIDEO_CAPTURE | STREAMING, device_caps), G_INPUT / S_INPUT /
 *           ENUMINPUT (one camera input), G_FMT / S_FMT / TRY_FMT (always YUYV at
 *           FAKE_V4L2_SIZE: other requests are adjusted, as drivers do), ENUM_FMT,
 *           ENUM_FRAMESIZES, ENUM_FRAMEINTERVALS, G_PARM / S_PARM (fixed time per
 *           frame), REQBUFS (MMAP only, at most MAX_BUFFERS, one owner at a time),
 *           QUERYBUF, QBUF, DQBUF, STREAMON, STREAMOFF.  Anything else (G_STD, ENUMSTD
 *           and the controls included, as on a webcam) fails with ENOTTY.
 *   DQBUF   waits for the next capture instant (frames are captured every 1/FPS s from
 *           STREAMON; when the reader falls behind by more than the queued buffers, the
 *           oldest captures are lost and `sequence` skips, as with a real camera), copies
 *           the next frame of the file into the buffer, and sets bytesused, sequence and
 *           a CLOCK_MONOTONIC capture timestamp (V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC).  The
 *           picture follows a clock shared by all opens, so after a reconnect it goes on
 *           where the scene is, not from the first frame.  With O_NONBLOCK: EAGAIN while
 *           no frame is due.
 *   mmap/mmap64/munmap of the device descriptor: checked against the buffers (offset
 *   and length from QUERYBUF) and tracked for V4L2_BUF_FLAG_MAPPED.
 * poll/select and the stat family are not intercepted: FFmpeg's reader does not use
 * them on the device (it blocks in DQBUF).
 *
 * Thread safety: one mutex guards all state; DQBUF waits on a condition variable (so a
 * QBUF from another thread, e.g. FFmpeg releasing a packet, is never blocked by it).
 */

#undef _FORTIFY_SOURCE
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/version.h>
#include <linux/videodev2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_HANDLES 16
#define MAX_BUFFERS 4
#define MARKER_POLL_NS 20000000LL /* how often a waiting DQBUF looks at the marker file */

/* ---- the real functions ------------------------------------------------------------ */

static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_close)(int);
static int (*real_ioctl)(int, unsigned long, ...);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static void *(*real_mmap64)(void *, size_t, int, int, int, off64_t);
static int (*real_munmap)(void *, size_t);

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void resolve_real(void)
{
    real_open = dlsym(RTLD_NEXT, "open");
    real_open64 = dlsym(RTLD_NEXT, "open64");
    real_openat = dlsym(RTLD_NEXT, "openat");
    real_openat64 = dlsym(RTLD_NEXT, "openat64");
    real_close = dlsym(RTLD_NEXT, "close");
    real_ioctl = dlsym(RTLD_NEXT, "ioctl");
    real_mmap = dlsym(RTLD_NEXT, "mmap");
    real_mmap64 = dlsym(RTLD_NEXT, "mmap64");
    real_munmap = dlsym(RTLD_NEXT, "munmap");
}

/* ---- configuration ----------------------------------------------------------------- */

static struct {
    const char *device;   /* NULL: not configured, everything passes through */
    const char *marker;   /* FAKE_V4L2_PLUGGED or NULL */
    int trace;
    unsigned width, height;
    unsigned tpf_num, tpf_den; /* time per frame = tpf_num / tpf_den seconds */
    int64_t period_ns;
    size_t frame_size;    /* width * height * 2 */
    size_t stride;        /* frame_size rounded up to whole pages: one buffer in the memfd */
    const uint8_t *frames; /* the frames file, mapped read-only */
    size_t n_frames;
    const char *error;    /* why the device cannot be opened, or NULL */
} cfg;

static void load_config(void)
{
    resolve_real();
    cfg.device = getenv("FAKE_V4L2_DEVICE");
    if (!cfg.device || !*cfg.device) {
        cfg.device = NULL;
        return;
    }
    cfg.marker = getenv("FAKE_V4L2_PLUGGED");
    if (cfg.marker && !*cfg.marker)
        cfg.marker = NULL;
    const char *trace = getenv("FAKE_V4L2_TRACE");
    cfg.trace = trace && *trace == '1';

    const char *size = getenv("FAKE_V4L2_SIZE");
    if (!size || sscanf(size, "%ux%u", &cfg.width, &cfg.height) != 2 || cfg.width < 2 || cfg.height < 1 ||
        cfg.width % 2 || cfg.width > 8192 || cfg.height > 8192) {
        cfg.error = "FAKE_V4L2_SIZE must be WxH with an even W";
        return;
    }
    const char *fps_text = getenv("FAKE_V4L2_FPS");
    double fps = fps_text && *fps_text ? strtod(fps_text, NULL) : 10.0;
    if (!(fps >= 0.1 && fps <= 1000.0)) {
        cfg.error = "FAKE_V4L2_FPS must be between 0.1 and 1000";
        return;
    }
    /* time per frame as a fraction 1000 / (fps * 1000), reduced */
    unsigned num = 1000, den = (unsigned)(fps * 1000.0 + 0.5), a = num, b = den;
    while (b) {
        unsigned t = a % b;
        a = b;
        b = t;
    }
    cfg.tpf_num = num / a;
    cfg.tpf_den = den / a;
    cfg.period_ns = (int64_t)(1e9 * cfg.tpf_num / cfg.tpf_den);

    cfg.frame_size = (size_t)cfg.width * cfg.height * 2;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    cfg.stride = (cfg.frame_size + page - 1) / page * page;

    const char *path = getenv("FAKE_V4L2_FRAMES");
    if (!path || !*path) {
        cfg.error = "FAKE_V4L2_FRAMES is not set";
        return;
    }
    int fd = real_open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        cfg.error = "cannot read FAKE_V4L2_FRAMES";
        if (fd >= 0)
            real_close(fd);
        return;
    }
    cfg.n_frames = (size_t)st.st_size / cfg.frame_size;
    if (cfg.n_frames == 0) {
        real_close(fd);
        cfg.error = "FAKE_V4L2_FRAMES holds less than one frame of FAKE_V4L2_SIZE";
        return;
    }
    void *p = real_mmap(NULL, cfg.n_frames * cfg.frame_size, PROT_READ, MAP_PRIVATE, fd, 0);
    real_close(fd);
    if (p == MAP_FAILED) {
        cfg.error = "cannot map FAKE_V4L2_FRAMES";
        return;
    }
    cfg.frames = p;
}

static void init(void)
{
    pthread_once(&init_once, load_config);
}

/* ---- state ------------------------------------------------------------------------- */

struct buffer {
    int queued;
    uint64_t queued_order; /* QBUF order: DQBUF returns the oldest queued buffer */
    void *mapped_at;       /* the caller's mapping, or NULL */
};

struct handle {
    int fd;                /* the memfd given to the caller; -1 = free slot */
    uint64_t id;           /* which open this is (a slot is reused after close) */
    int dead;              /* the camera it was opened on was unplugged */
    struct stat plugged;   /* the marker file as it was at open */
    unsigned n_buffers;
    uint8_t *base;         /* the library's own mapping of all buffers */
    struct buffer buffers[MAX_BUFFERS];
    int streaming;
    int64_t first_capture_ns; /* capture time of sequence 0 */
    uint64_t next_sequence;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;     /* QBUF, STREAMOFF, close: a waiting DQBUF looks again */
static struct handle handles[MAX_HANDLES];
static int open_handles;        /* read without the lock as a fast path: 0 = nothing to look up */
static struct handle *owner;    /* the handle whose buffers are allocated (one at a time) */
static int64_t scene_start_ns = -1; /* the picture's clock, shared by all opens */
static uint64_t qbuf_counter;
static uint64_t open_counter;

static void init_state(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wake, &attr);
    pthread_condattr_destroy(&attr);
    for (int i = 0; i < MAX_HANDLES; i++)
        handles[i].fd = -1;
}

static pthread_once_t state_once = PTHREAD_ONCE_INIT;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int any_handles(void)
{
    return __atomic_load_n(&open_handles, __ATOMIC_ACQUIRE) > 0;
}

/* Caller holds the lock. */
static struct handle *find_handle(int fd)
{
    if (fd < 0)
        return NULL;
    for (int i = 0; i < MAX_HANDLES; i++)
        if (handles[i].fd == fd)
            return &handles[i];
    return NULL;
}

/* 1 if the camera is plugged in; *st receives the marker's identity. */
static int plugged_in(struct stat *st)
{
    memset(st, 0, sizeof(*st));
    if (!cfg.marker)
        return 1;
    return stat(cfg.marker, st) == 0;
}

/* Caller holds the lock.  Marks the handle dead once its camera was unplugged. */
static int still_plugged(struct handle *h)
{
    if (h->dead)
        return 0;
    struct stat st;
    if (!plugged_in(&st) || st.st_dev != h->plugged.st_dev || st.st_ino != h->plugged.st_ino ||
        st.st_ctim.tv_sec != h->plugged.st_ctim.tv_sec || st.st_ctim.tv_nsec != h->plugged.st_ctim.tv_nsec) {
        h->dead = 1;
        pthread_cond_broadcast(&wake);
    }
    return !h->dead;
}

/* ---- open / close ------------------------------------------------------------------ */

static int is_device(const char *path)
{
    init();
    return cfg.device && path && strcmp(path, cfg.device) == 0;
}

static int open_device(int flags)
{
    pthread_once(&state_once, init_state);
    if (cfg.error) {
        fprintf(stderr, "fake_v4l2: %s: %s\n", cfg.device, cfg.error);
        errno = EIO;
        return -1;
    }
    struct stat st;
    if (!plugged_in(&st)) {
        errno = ENOENT;
        return -1;
    }
    int fd = memfd_create("fake_v4l2", (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);
    if (fd < 0)
        return -1;
    if (flags & O_NONBLOCK)
        fcntl(fd, F_SETFL, O_NONBLOCK);
    pthread_mutex_lock(&lock);
    struct handle *h = NULL;
    for (int i = 0; i < MAX_HANDLES && !h; i++)
        if (handles[i].fd < 0)
            h = &handles[i];
    if (!h) {
        pthread_mutex_unlock(&lock);
        real_close(fd);
        errno = EMFILE;
        return -1;
    }
    memset(h, 0, sizeof(*h));
    h->fd = fd;
    h->id = ++open_counter;
    h->plugged = st;
    __atomic_add_fetch(&open_handles, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    if (cfg.trace)
        fprintf(stderr, "fake_v4l2: open %s -> fd %d\n", cfg.device, fd);
    return fd;
}

/* Caller holds the lock. */
static void free_buffers(struct handle *h)
{
    if (h->base)
        real_munmap(h->base, cfg.stride * h->n_buffers);
    h->base = NULL;
    h->n_buffers = 0;
    h->streaming = 0;
    memset(h->buffers, 0, sizeof(h->buffers));
    if (owner == h)
        owner = NULL;
}

static int mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, int) : 0;
}

/* Shared start of the open family: the device path opens the fake device; any other
 * path gets `mode` (the optional variadic argument) for the real call. */
#define OPEN_DEVICE_OR_GET_MODE(path, flags)    \
    va_list ap;                                 \
    va_start(ap, flags);                        \
    int mode = mode_arg(flags, ap);             \
    va_end(ap);                                 \
    if (is_device(path))                        \
        return open_device(flags)

int open(const char *path, int flags, ...)
{
    OPEN_DEVICE_OR_GET_MODE(path, flags);
    return real_open(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    OPEN_DEVICE_OR_GET_MODE(path, flags);
    return real_open64(path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
    OPEN_DEVICE_OR_GET_MODE(path, flags); /* only the absolute path is the device: dirfd does not matter */
    return real_openat(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    OPEN_DEVICE_OR_GET_MODE(path, flags);
    return real_openat64(dirfd, path, flags, mode);
}

int close(int fd)
{
    init();
    if (any_handles()) {
        pthread_mutex_lock(&lock);
        struct handle *h = find_handle(fd);
        if (h) {
            free_buffers(h); /* the caller's own mappings stay valid until it unmaps them */
            h->fd = -1;
            __atomic_sub_fetch(&open_handles, 1, __ATOMIC_RELEASE);
            pthread_cond_broadcast(&wake);
            if (cfg.trace)
                fprintf(stderr, "fake_v4l2: close fd %d\n", fd);
        }
        pthread_mutex_unlock(&lock);
    }
    return real_close(fd);
}

/* ---- mmap / munmap ----------------------------------------------------------------- */

/* NULL = not the device (pass through); MAP_FAILED with errno = refused. */
static void *map_buffer(void *addr, size_t length, int prot, int flags, int fd, off64_t offset, int *handled)
{
    *handled = 0;
    if (!any_handles())
        return NULL;
    pthread_mutex_lock(&lock);
    struct handle *h = find_handle(fd);
    if (!h) {
        pthread_mutex_unlock(&lock);
        return NULL;
    }
    *handled = 1;
    void *result = MAP_FAILED;
    unsigned i = (unsigned)(offset / (off64_t)cfg.stride);
    if (!still_plugged(h)) {
        errno = ENODEV;
    } else if (offset < 0 || offset % (off64_t)cfg.stride || i >= h->n_buffers || length == 0 ||
               length > cfg.stride || !(flags & MAP_SHARED)) {
        errno = EINVAL;
    } else {
        result = real_mmap(addr, length, prot, flags, fd, (off_t)offset);
        if (result != MAP_FAILED)
            h->buffers[i].mapped_at = result;
    }
    pthread_mutex_unlock(&lock);
    return result;
}

void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
    init();
    int handled;
    void *p = map_buffer(addr, length, prot, flags, fd, offset, &handled);
    return handled ? p : real_mmap(addr, length, prot, flags, fd, offset);
}

void *mmap64(void *addr, size_t length, int prot, int flags, int fd, off64_t offset)
{
    init();
    int handled;
    void *p = map_buffer(addr, length, prot, flags, fd, offset, &handled);
    return handled ? p : real_mmap64(addr, length, prot, flags, fd, offset);
}

int munmap(void *addr, size_t length)
{
    init();
    if (any_handles()) {
        pthread_mutex_lock(&lock);
        for (int i = 0; i < MAX_HANDLES; i++)
            for (unsigned b = 0; handles[i].fd >= 0 && b < handles[i].n_buffers; b++)
                if (handles[i].buffers[b].mapped_at == addr)
                    handles[i].buffers[b].mapped_at = NULL;
        pthread_mutex_unlock(&lock);
    }
    return real_munmap(addr, length);
}

/* ---- ioctl ------------------------------------------------------------------------- */

static void set_format(struct v4l2_pix_format *pix)
{
    memset(pix, 0, sizeof(*pix));
    pix->width = cfg.width;
    pix->height = cfg.height;
    pix->pixelformat = V4L2_PIX_FMT_YUYV;
    pix->field = V4L2_FIELD_NONE;
    pix->bytesperline = cfg.width * 2;
    pix->sizeimage = (unsigned)cfg.frame_size;
    pix->colorspace = V4L2_COLORSPACE_SRGB;
}

static void describe_buffer(struct handle *h, unsigned i, struct v4l2_buffer *buf)
{
    buf->index = i;
    buf->type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    buf->memory = V4L2_MEMORY_MMAP;
    buf->m.offset = (unsigned)(i * cfg.stride);
    buf->length = (unsigned)cfg.frame_size;
    buf->field = V4L2_FIELD_NONE;
    buf->flags = V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC | V4L2_BUF_FLAG_TSTAMP_SRC_SOE;
    if (h->buffers[i].mapped_at)
        buf->flags |= V4L2_BUF_FLAG_MAPPED;
    if (h->buffers[i].queued)
        buf->flags |= V4L2_BUF_FLAG_QUEUED;
}

static int valid_buffer(struct handle *h, const struct v4l2_buffer *buf)
{
    return buf->type == V4L2_BUF_TYPE_VIDEO_CAPTURE && buf->memory == V4L2_MEMORY_MMAP &&
           buf->index < h->n_buffers;
}

/* Caller holds the lock. */
static int request_buffers(struct handle *h, struct v4l2_requestbuffers *req)
{
    if (req->type != V4L2_BUF_TYPE_VIDEO_CAPTURE || req->memory != V4L2_MEMORY_MMAP)
        return EINVAL;
    if (owner && owner != h && !owner->dead)
        return EBUSY; /* another open streams from the camera */
    for (unsigned i = 0; i < h->n_buffers; i++)
        if (h->buffers[i].mapped_at)
            return EBUSY;
    free_buffers(h);
    req->capabilities = V4L2_BUF_CAP_SUPPORTS_MMAP;
    if (req->count == 0)
        return 0;
    unsigned n = req->count < 2 ? 2 : req->count > MAX_BUFFERS ? MAX_BUFFERS : req->count;
    if (ftruncate(h->fd, (off_t)(cfg.stride * n)) < 0)
        return ENOMEM;
    void *base = real_mmap(NULL, cfg.stride * n, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
    if (base == MAP_FAILED)
        return ENOMEM;
    h->base = base;
    h->n_buffers = n;
    req->count = n;
    owner = h;
    return 0;
}

/* Caller holds the lock; may wait on `wake` (which releases it meanwhile). */
static int dequeue(struct handle *h, struct v4l2_buffer *buf)
{
    if (buf->type != V4L2_BUF_TYPE_VIDEO_CAPTURE || buf->memory != V4L2_MEMORY_MMAP)
        return EINVAL;
    uint64_t id = h->id;
    for (;;) {
        if (h->fd < 0 || h->id != id)
            return EBADF; /* closed by another thread while this one waited */
        if (!still_plugged(h))
            return ENODEV;
        if (!h->streaming)
            return EINVAL;
        unsigned queued = 0;
        int oldest = -1;
        for (unsigned i = 0; i < h->n_buffers; i++) {
            if (!h->buffers[i].queued)
                continue;
            queued++;
            if (oldest < 0 || h->buffers[i].queued_order < h->buffers[oldest].queued_order)
                oldest = (int)i;
        }
        int64_t now = now_ns();
        int64_t wait_until;
        if (queued && now >= h->first_capture_ns) {
            /* Captures the camera made while the reader was away fill the queued buffers;
             * older ones than those were lost (no buffer to put them in). */
            uint64_t latest = (uint64_t)((now - h->first_capture_ns) / cfg.period_ns);
            if (latest + 1 > h->next_sequence + queued)
                h->next_sequence = latest + 1 - queued;
        }
        int64_t due = h->first_capture_ns + (int64_t)h->next_sequence * cfg.period_ns;
        if (queued && now >= due) {
            struct buffer *b = &h->buffers[oldest];
            int64_t since_scene_start = due > scene_start_ns ? due - scene_start_ns : 0;
            uint64_t scene = (uint64_t)(since_scene_start / cfg.period_ns) % cfg.n_frames;
            memcpy(h->base + (size_t)oldest * cfg.stride, cfg.frames + scene * cfg.frame_size, cfg.frame_size);
            b->queued = 0;
            describe_buffer(h, (unsigned)oldest, buf);
            buf->bytesused = (unsigned)cfg.frame_size;
            buf->sequence = (unsigned)h->next_sequence;
            buf->timestamp.tv_sec = due / 1000000000LL;
            buf->timestamp.tv_usec = (due % 1000000000LL) / 1000;
            h->next_sequence++;
            return 0;
        }
        if (fcntl(h->fd, F_GETFL) & O_NONBLOCK)
            return EAGAIN;
        wait_until = now + MARKER_POLL_NS;
        if (queued && due < wait_until)
            wait_until = due;
        struct timespec ts = {.tv_sec = wait_until / 1000000000LL, .tv_nsec = wait_until % 1000000000LL};
        pthread_cond_timedwait(&wake, &lock, &ts);
    }
}

/* Caller holds the lock.  Returns 0 or an errno value. */
static int device_ioctl(struct handle *h, unsigned long request, void *arg)
{
    if (!still_plugged(h))
        return ENODEV;
    switch (request) {
    case VIDIOC_QUERYCAP: {
        struct v4l2_capability *cap = arg;
        memset(cap, 0, sizeof(*cap));
        snprintf((char *)cap->driver, sizeof(cap->driver), "fake_v4l2");
        snprintf((char *)cap->card, sizeof(cap->card), "Fake camera %s", cfg.device);
        snprintf((char *)cap->bus_info, sizeof(cap->bus_info), "platform:fake_v4l2");
        cap->version = KERNEL_VERSION(6, 1, 0);
        cap->device_caps = V4L2_CAP_VIDEO_CAPTURE | V4L2_CAP_STREAMING;
        cap->capabilities = cap->device_caps | V4L2_CAP_DEVICE_CAPS;
        return 0;
    }
    case VIDIOC_G_INPUT:
        *(int *)arg = 0;
        return 0;
    case VIDIOC_S_INPUT:
        return *(int *)arg == 0 ? 0 : EINVAL;
    case VIDIOC_ENUMINPUT: {
        struct v4l2_input *input = arg;
        if (input->index != 0)
            return EINVAL;
        memset(input, 0, sizeof(*input));
        snprintf((char *)input->name, sizeof(input->name), "Camera 1");
        input->type = V4L2_INPUT_TYPE_CAMERA;
        return 0;
    }
    case VIDIOC_ENUM_FMT: {
        struct v4l2_fmtdesc *desc = arg;
        if (desc->type != V4L2_BUF_TYPE_VIDEO_CAPTURE || desc->index != 0)
            return EINVAL;
        unsigned index = desc->index, type = desc->type;
        memset(desc, 0, sizeof(*desc));
        desc->index = index;
        desc->type = type;
        desc->pixelformat = V4L2_PIX_FMT_YUYV;
        snprintf((char *)desc->description, sizeof(desc->description), "YUYV 4:2:2");
        return 0;
    }
    case VIDIOC_ENUM_FRAMESIZES: {
        struct v4l2_frmsizeenum *size = arg;
        if (size->index != 0 || size->pixel_format != V4L2_PIX_FMT_YUYV)
            return EINVAL;
        size->type = V4L2_FRMSIZE_TYPE_DISCRETE;
        size->discrete.width = cfg.width;
        size->discrete.height = cfg.height;
        return 0;
    }
    case VIDIOC_ENUM_FRAMEINTERVALS: {
        struct v4l2_frmivalenum *ival = arg;
        if (ival->index != 0 || ival->pixel_format != V4L2_PIX_FMT_YUYV || ival->width != cfg.width ||
            ival->height != cfg.height)
            return EINVAL;
        ival->type = V4L2_FRMIVAL_TYPE_DISCRETE;
        ival->discrete.numerator = cfg.tpf_num;
        ival->discrete.denominator = cfg.tpf_den;
        return 0;
    }
    case VIDIOC_G_FMT:
    case VIDIOC_S_FMT:
    case VIDIOC_TRY_FMT: {
        struct v4l2_format *fmt = arg;
        if (fmt->type != V4L2_BUF_TYPE_VIDEO_CAPTURE)
            return EINVAL;
        if (request == VIDIOC_S_FMT && h->n_buffers)
            return EBUSY;
        set_format(&fmt->fmt.pix);
        return 0;
    }
    case VIDIOC_G_PARM:
    case VIDIOC_S_PARM: {
        struct v4l2_streamparm *parm = arg;
        if (parm->type != V4L2_BUF_TYPE_VIDEO_CAPTURE)
            return EINVAL;
        memset(&parm->parm, 0, sizeof(parm->parm));
        parm->parm.capture.capability = V4L2_CAP_TIMEPERFRAME;
        parm->parm.capture.timeperframe.numerator = cfg.tpf_num; /* the only rate there is */
        parm->parm.capture.timeperframe.denominator = cfg.tpf_den;
        parm->parm.capture.readbuffers = MAX_BUFFERS;
        return 0;
    }
    case VIDIOC_REQBUFS:
        return request_buffers(h, arg);
    case VIDIOC_QUERYBUF: {
        struct v4l2_buffer *buf = arg;
        if (!valid_buffer(h, buf))
            return EINVAL;
        describe_buffer(h, buf->index, buf);
        buf->bytesused = 0;
        return 0;
    }
    case VIDIOC_QBUF: {
        struct v4l2_buffer *buf = arg;
        if (!valid_buffer(h, buf) || h->buffers[buf->index].queued)
            return EINVAL;
        h->buffers[buf->index].queued = 1;
        h->buffers[buf->index].queued_order = ++qbuf_counter;
        describe_buffer(h, buf->index, buf);
        pthread_cond_broadcast(&wake);
        return 0;
    }
    case VIDIOC_DQBUF:
        return dequeue(h, arg);
    case VIDIOC_STREAMON:
        if (*(int *)arg != V4L2_BUF_TYPE_VIDEO_CAPTURE || !h->n_buffers)
            return EINVAL;
        if (!h->streaming) {
            h->streaming = 1;
            h->next_sequence = 0;
            h->first_capture_ns = now_ns() + cfg.period_ns;
            if (scene_start_ns < 0)
                scene_start_ns = h->first_capture_ns;
        }
        return 0;
    case VIDIOC_STREAMOFF:
        if (*(int *)arg != V4L2_BUF_TYPE_VIDEO_CAPTURE)
            return EINVAL;
        h->streaming = 0;
        for (unsigned i = 0; i < h->n_buffers; i++)
            h->buffers[i].queued = 0;
        pthread_cond_broadcast(&wake);
        return 0;
    default:
        return ENOTTY;
    }
}

static const char *ioctl_name(unsigned long request)
{
    switch (request) {
#define NAME(r) case r: return #r
    NAME(VIDIOC_QUERYCAP); NAME(VIDIOC_G_INPUT); NAME(VIDIOC_S_INPUT); NAME(VIDIOC_ENUMINPUT);
    NAME(VIDIOC_G_STD); NAME(VIDIOC_S_STD); NAME(VIDIOC_ENUMSTD); NAME(VIDIOC_ENUM_FMT);
    NAME(VIDIOC_ENUM_FRAMESIZES); NAME(VIDIOC_ENUM_FRAMEINTERVALS); NAME(VIDIOC_G_FMT);
    NAME(VIDIOC_S_FMT); NAME(VIDIOC_TRY_FMT); NAME(VIDIOC_G_PARM); NAME(VIDIOC_S_PARM);
    NAME(VIDIOC_REQBUFS); NAME(VIDIOC_QUERYBUF); NAME(VIDIOC_QBUF); NAME(VIDIOC_DQBUF);
    NAME(VIDIOC_STREAMON); NAME(VIDIOC_STREAMOFF);
#undef NAME
    default: return "ioctl";
    }
}

int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    init();
    if (any_handles()) {
        pthread_mutex_lock(&lock);
        struct handle *h = find_handle(fd);
        if (h) {
            int err = arg ? device_ioctl(h, request, arg) : EFAULT;
            pthread_mutex_unlock(&lock);
            if (cfg.trace)
                fprintf(stderr, "fake_v4l2: fd %d %s (0x%lx) -> %s\n", fd, ioctl_name(request), request,
                        err ? strerror(err) : "ok");
            if (err) {
                errno = err;
                return -1;
            }
            return 0;
        }
        pthread_mutex_unlock(&lock);
    }
    return real_ioctl(fd, request, arg);
}
