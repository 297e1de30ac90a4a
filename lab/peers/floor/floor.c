/*
 * floor: the lab's FLOOR program. NOT an HTTP server.
 *
 * It measures what the kernel and the loopback TCP stack cost per request, so that the servers'
 * figures can be read against it: each of WORKERS threads owns a SO_REUSEPORT listener and an epoll
 * loop, reads whatever arrives on ready sockets, counts "\r\n\r\n" sequences and writes one fixed
 * "Hello, World!" response per sequence counted. No parsing, no validation, no routing: every
 * request, whatever its method or path, gets the same answer, so it serves only the "plaintext"
 * scenario. A request with a body would be miscounted; the lab never sends one here.
 *
 * The only concessions to the scenario contract are a Server header and a Date header refreshed
 * once a second (a vDSO clock read per loop turn), so that the lab's parity check passes honestly.
 *
 * The inner loops come in variants, chosen at start so that they can be measured against each
 * other on one binary (docs/performance.md, "The floor"); the defaults are the cheapest measured:
 *   FLOOR_SCAN   how "\r\n\r\n" is found: bytes (the last 4 bytes compared per byte), memchr
 *                ('\r', then a 4-byte compare), memmem (glibc), sse2 or avx2 (16 / 32 positions
 *                per step); default auto: avx2 where the CPU has it, else sse2 (else memchr)
 *   FLOOR_WRITE  how n responses are sent: copy (memcpy'd into a buffer, then one write), block
 *                (one write from a block of responses built once a second), writev (one writev
 *                of n iovecs of the same response); default block
 *   FLOOR_READ_KIB  the read buffer in KiB (4..4096); default 64
 * Whatever the variant, the answer is one response per "\r\n\r\n", terminators split across reads
 * included, and a response is written only after its request's terminator arrived.
 *
 * Environment: ADDR (host:port, default 127.0.0.1:8080), WORKERS (threads, default 1), the above.
 * Build: gcc -O2 -pthread -o floor floor.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define WRITE_BUF (64 * 1024)
#define MAX_EVENTS 256
#define MAX_IOV 1024 /* IOV_MAX on Linux */

static const char BODY[] = "Hello, World!";
static const char END[4] = {'\r', '\n', '\r', '\n'};
/* "Date: " + 29 characters of IMF-fixdate */
#define DATE_LEN 29

struct response {
    char bytes[256];
    size_t len;
    size_t date_at; /* offset of the date value inside bytes */
    time_t second;  /* second the date was rendered for */
    char *block;    /* FLOOR_WRITE=block: `per` copies of bytes, dates kept current */
    size_t per;     /* whole responses in one write (WRITE_BUF / len, at most MAX_IOV) */
};

/* Per-connection state: where the "\r\n\r\n" matcher is, and answers not yet written. */
struct conn {
    int fd;
    int matched;       /* characters of "\r\n\r\n" matched so far (0..3) */
    unsigned long owed; /* whole responses still to write */
    size_t partial;    /* bytes of the current response already written */
    int want_out;      /* registered for EPOLLOUT (reading paused until drained) */
};

/* Counts the "\r\n\r\n" in in[0..n), continuing a match of *matched (0..3) bytes left by the
 * previous read, and leaves in *matched the bytes of a terminator begun at the end. */
typedef unsigned long (*count_fn)(const char *in, size_t n, int *matched);

enum write_mode { WRITE_COPY, WRITE_BLOCK, WRITE_WRITEV };

static struct addrinfo *listen_addr;
static count_fn count_terminators;
static enum write_mode write_mode = WRITE_BLOCK;
static size_t read_buf = 64 * 1024;

static void render_response(struct response *r) {
    r->len = (size_t)snprintf(r->bytes, sizeof r->bytes,
                              "HTTP/1.1 200 OK\r\nServer: floor\r\nDate: %*s\r\n"
                              "Content-Type: text/plain\r\nContent-Length: %zu\r\n\r\n%s",
                              DATE_LEN, "", sizeof BODY - 1, BODY);
    r->date_at = (size_t)(strstr(r->bytes, "Date: ") - r->bytes) + 6;
    r->second = 0;
    r->per = WRITE_BUF / r->len < MAX_IOV ? WRITE_BUF / r->len : MAX_IOV;
    for (size_t i = 0; r->block && i < r->per; i++) memcpy(r->block + i * r->len, r->bytes, r->len);
}

static void refresh_date(struct response *r) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    if (now.tv_sec == r->second) return;
    r->second = now.tv_sec;
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    char date[DATE_LEN + 1];
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    memcpy(r->bytes + r->date_at, date, DATE_LEN);
    /* Once a second: the block's copies take the new date too, so writes from it need no copy. */
    for (size_t i = 0; r->block && i < r->per; i++)
        memcpy(r->block + i * r->len + r->date_at, date, DATE_LEN);
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* ------------------------------------------------------------------ the scans */

/* FLOOR_SCAN=bytes: the last four bytes in a shift register, compared with "\r\n\r\n" once per
 * byte; no call, no setup (a plain 30-line epoll loop's scan). Emptying it after a terminator keeps
 * terminators from overlapping, as in the other scans. */
static unsigned long count_bytes(const char *in, size_t n, int *matched) {
    static const uint32_t prefix[4] = {0, 0x0d, 0x0d0a, 0x0d0a0d};
    unsigned long found = 0;
    uint32_t w = prefix[*matched];
    for (size_t i = 0; i < n; i++) {
        w = w << 8 | (unsigned char)in[i];
        if (w == 0x0d0a0d0a) {
            found++;
            w = 0;
        }
    }
    *matched = (w & 0xffffff) == 0x0d0a0d ? 3 : (w & 0xffff) == 0x0d0a ? 2 : (w & 0xff) == 0x0d;
    return found;
}

static int is_terminator(const char *p) {
    uint32_t v, t;
    memcpy(&v, p, 4);
    memcpy(&t, END, 4);
    return v == t;
}

/* Where the bulk finders start: a match begun in the previous read is stepped byte by byte
 * (usually a few bytes) and its count added to *found; returns the offset the finder starts at,
 * or n when the whole read continued a match (then *matched is set). */
static size_t carry_in(const char *in, size_t n, int *matched, unsigned long *found) {
    if (*matched == 0) return 0;
    size_t i = 0;
    int m = *matched;
    while (m != 0 && i < n) {
        char ch = in[i++];
        if (ch == END[m]) {
            if (++m == 4) {
                ++*found;
                m = 0;
            }
        } else {
            m = ch == '\r';
        }
    }
    *matched = m;
    return m != 0 ? n : i;
}

/* The bytes of a terminator begun at the end of in[rest..n): the longest suffix that is a
 * prefix of "\r\n\r\n" (rest is just past the last terminator counted). */
static int tail_state(const char *in, size_t rest, size_t n) {
    for (int k = 3; k > 0; k--)
        if (n - rest >= (size_t)k && memcmp(in + n - k, END, (size_t)k) == 0) return k;
    return 0;
}

/* A bulk finder counts the terminators in p[0..n) that do not overlap an earlier one and
 * returns the offset just past the last (0 if none). */
#define BULK_COUNT(NAME, FINDER)                                                   \
    static unsigned long NAME(const char *in, size_t n, int *matched) {            \
        unsigned long found = 0;                                                   \
        size_t i = carry_in(in, n, matched, &found);                               \
        if (i == n && *matched != 0) return found;                                 \
        size_t rest = i + FINDER(in + i, n - i, &found);                           \
        *matched = tail_state(in, rest, n);                                        \
        return found;                                                              \
    }

static size_t find_memmem(const char *p, size_t n, unsigned long *found) {
    const char *at = p, *end = p + n, *hit;
    while ((hit = memmem(at, (size_t)(end - at), END, 4)) != NULL) {
        ++*found;
        at = hit + 4;
    }
    return (size_t)(at - p);
}
BULK_COUNT(count_memmem, find_memmem)

static size_t find_memchr(const char *p, size_t n, unsigned long *found) {
    const char *at = p, *end = p + n, *cr;
    size_t rest = 0;
    while (end - at >= 4 && (cr = memchr(at, '\r', (size_t)(end - at - 3))) != NULL) {
        if (is_terminator(cr)) {
            ++*found;
            at = cr + 4;
            rest = (size_t)(at - p);
        } else {
            at = cr + 1;
        }
    }
    return rest;
}
BULK_COUNT(count_memchr, find_memchr)

/* The start positions from `from` on, one at a time (a read shorter than a vector step). */
static size_t find_scalar(const char *p, size_t from, size_t n, size_t next, unsigned long *found) {
    for (size_t i = from > next ? from : next; i + 4 <= n; i++)
        if (is_terminator(p + i)) {
            ++*found;
            next = i + 4;
            i += 3;
        }
    return next;
}

/* Adds the terminators whose starts are the set bits of `mask` (bit k = position base + k),
 * skipping any that overlaps the previous one ("\r\n\r\n\r\n" holds one, as in the byte loop). */
static size_t take_mask(uint32_t mask, size_t base, size_t next, unsigned long *found) {
    while (mask) {
        size_t at = base + (size_t)__builtin_ctz(mask);
        mask &= mask - 1;
        if (at >= next) {
            ++*found;
            next = at + 4;
        }
    }
    return next;
}

#if defined(__x86_64__)
/* A vector finder: W start positions per step (bytes equal to \r, \n, \r, \n at offsets 0..3,
 * ANDed); the positions left at the end (fewer than W) take one more step that overlaps the last
 * one, and only reads shorter than a step go byte by byte. The overlap needs no mask: every
 * terminator it sees again starts before `next`, so take_mask skips it. */
#define FIND_VECTOR(NAME, ATTR, W, MASK)                                           \
    ATTR static size_t NAME(const char *p, size_t n, unsigned long *found) {       \
        size_t i = 0, next = 0;                                                    \
        for (; i + W + 3 <= n; i += W) {                                           \
            uint32_t mask = MASK(p + i);                                           \
            if (mask) next = take_mask(mask, i, next, found);                      \
        }                                                                          \
        if (n < W + 3) return find_scalar(p, i, n, next, found);                   \
        if (i + 4 <= n) {                                                          \
            size_t base = n - (W + 3);                                             \
            uint32_t mask = MASK(p + base);                                        \
            if (mask) next = take_mask(mask, base, next, found);                   \
        }                                                                          \
        return next;                                                               \
    }

static inline uint32_t mask_sse2(const char *q) {
    const __m128i cr = _mm_set1_epi8('\r'), lf = _mm_set1_epi8('\n');
    __m128i a = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)q), cr);
    __m128i b = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(q + 1)), lf);
    __m128i c = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(q + 2)), cr);
    __m128i d = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(q + 3)), lf);
    return (uint32_t)_mm_movemask_epi8(_mm_and_si128(_mm_and_si128(a, b), _mm_and_si128(c, d)));
}
FIND_VECTOR(find_sse2, , 16, mask_sse2)
BULK_COUNT(count_sse2, find_sse2)

/* The same 32 positions at a time; chosen only where the CPU has AVX2. */
#define AVX2 __attribute__((target("avx2")))
AVX2 static inline uint32_t mask_avx2(const char *q) {
    const __m256i cr = _mm256_set1_epi8('\r'), lf = _mm256_set1_epi8('\n');
    __m256i a = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)q), cr);
    __m256i b = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(q + 1)), lf);
    __m256i c = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(q + 2)), cr);
    __m256i d = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(q + 3)), lf);
    __m256i both = _mm256_and_si256(_mm256_and_si256(a, b), _mm256_and_si256(c, d));
    return (uint32_t)_mm256_movemask_epi8(both);
}
FIND_VECTOR(find_avx2, AVX2, 32, mask_avx2)
BULK_COUNT(count_avx2, find_avx2)
#endif

/* ------------------------------------------------------------------ the variants */

/* In FLOOR_SCAN's order of names; usable = 0: not on this CPU or architecture. */
struct scan_variant {
    count_fn count;
    int usable;
};

static int choose(const char *var, const char *dflt, const char *const *names, int n) {
    const char *v = getenv(var);
    if (!v || !*v) v = dflt;
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0) return i;
    fprintf(stderr, "%s=%s is not one of:", var, v);
    for (int i = 0; i < n; i++) fprintf(stderr, " %s", names[i]);
    fputc('\n', stderr);
    exit(2);
}

/* Reads FLOOR_SCAN, FLOOR_WRITE and FLOOR_READ_KIB; a bad value is an error that lists the good. */
static void choose_variants(void) {
    const char *scan_names[] = {"bytes", "memchr", "memmem", "sse2", "avx2", "auto"};
    struct scan_variant scans[] = {
        {count_bytes, 1},
        {count_memchr, 1},
        {count_memmem, 1},
#if defined(__x86_64__)
        {count_sse2, 1},
        {count_avx2, __builtin_cpu_supports("avx2")},
#else
        {NULL, 0},
        {NULL, 0},
#endif
    };
    int s = choose("FLOOR_SCAN", "auto", scan_names, 6);
    if (s == 5) s = scans[4].usable ? 4 : scans[3].usable ? 3 : 1; /* the cheapest this CPU runs */
    if (!scans[s].usable) {
        fprintf(stderr, "FLOOR_SCAN=%s: this CPU cannot run it\n", scan_names[s]);
        exit(2);
    }
    count_terminators = scans[s].count;
    const char *write_names[] = {"copy", "block", "writev"};
    write_mode = (enum write_mode)choose("FLOOR_WRITE", "block", write_names, 3);
    const char *kib = getenv("FLOOR_READ_KIB");
    if (kib && *kib) {
        char *end = NULL;
        long k = strtol(kib, &end, 10);
        if (*end || k < 4 || k > 4096) {
            fprintf(stderr, "FLOOR_READ_KIB=%s is not a whole number of KiB from 4 to 4096\n", kib);
            exit(2);
        }
        read_buf = (size_t)k * 1024;
    }
    /* Said once at start, so that a run's log shows which floor it measured. */
    fprintf(stderr, "floor: FLOOR_SCAN=%s FLOOR_WRITE=%s FLOOR_READ_KIB=%zu\n", scan_names[s],
            write_names[write_mode], read_buf / 1024);
}

/* ------------------------------------------------------------------ the loop */

static int open_listener(void) {
    int fd = socket(listen_addr->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) die("SO_REUSEADDR");
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) die("SO_REUSEPORT");
    if (bind(fd, listen_addr->ai_addr, listen_addr->ai_addrlen) < 0) die("bind ADDR");
    if (listen(fd, 4096) < 0) die("listen");
    return fd;
}

static void close_conn(int ep, struct conn *c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
}

/* One write of up to r->per of the owed responses, the first `partial` bytes already sent. */
static ssize_t write_some(struct conn *c, struct response *r, size_t n, char *out,
                          struct iovec *iov) {
    size_t len = n * r->len - c->partial;
    switch (write_mode) {
    case WRITE_BLOCK:
        return write(c->fd, r->block + c->partial, len);
    case WRITE_WRITEV:
        iov[0].iov_base = r->bytes + c->partial; /* the others stay whole responses */
        iov[0].iov_len = r->len - c->partial;
        return writev(c->fd, iov, (int)n);
    case WRITE_COPY:
    default:
        for (size_t i = 0; i < n; i++) memcpy(out + i * r->len, r->bytes, r->len);
        return write(c->fd, out + c->partial, len);
    }
}

/* Writes what is owed; returns -1 if the connection failed, else 0 (possibly still owing). */
static int flush_owed(int ep, struct conn *c, struct response *r, char *out, struct iovec *iov) {
    while (c->owed > 0) {
        size_t n = c->owed < r->per ? c->owed : r->per, len = n * r->len;
        ssize_t w = write_some(c, r, n, out, iov);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) return -1;
            w = 0;
        }
        size_t done = c->partial + (size_t)w;
        c->owed -= done / r->len;
        c->partial = done % r->len;
        if (done < len) break; /* socket buffer full */
    }
    int want_out = c->owed > 0;
    if (want_out != c->want_out) {
        struct epoll_event ev = {.events = want_out ? EPOLLOUT : EPOLLIN, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) < 0) return -1;
        c->want_out = want_out;
    }
    return 0;
}

/* Reads what is there, counts request terminators; returns -1 on EOF or error. */
static int read_requests(struct conn *c, char *in) {
    for (;;) {
        ssize_t n = read(c->fd, in, read_buf);
        if (n == 0) return -1;
        if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
        c->owed += count_terminators(in, (size_t)n, &c->matched);
        if ((size_t)n < read_buf) return 0; /* drained (level-triggered epoll reports any rest) */
    }
}

static void *worker(void *arg) {
    (void)arg;
    int lfd = open_listener();
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}; /* NULL marks the listener */
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0) die("epoll_ctl listener");
    char *in = malloc(read_buf), *out = malloc(WRITE_BUF);
    struct response *r = calloc(1, sizeof *r);
    struct iovec *iov = malloc(MAX_IOV * sizeof *iov);
    if (!in || !out || !r || !iov) die("malloc");
    if (write_mode == WRITE_BLOCK && !(r->block = malloc(WRITE_BUF))) die("malloc");
    render_response(r);
    for (size_t i = 0; i < r->per; i++)
        iov[i] = (struct iovec){.iov_base = r->bytes, .iov_len = r->len};
    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(ep, events, MAX_EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        refresh_date(r);
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (c == NULL) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *nc = calloc(1, sizeof *nc);
                    if (!nc) die("calloc");
                    nc->fd = fd;
                    struct epoll_event cev = {.events = EPOLLIN, .data.ptr = nc};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev) < 0) {
                        close(fd);
                        free(nc);
                    }
                }
                continue;
            }
            if (events[i].events & (EPOLLERR | EPOLLHUP) && !(events[i].events & EPOLLIN)) {
                close_conn(ep, c);
                continue;
            }
            if (!c->want_out && read_requests(c, in) < 0) {
                close_conn(ep, c);
                continue;
            }
            if (flush_owed(ep, c, r, out, iov) < 0) close_conn(ep, c);
        }
    }
    return NULL;
}

int main(void) {
    const char *addr = getenv("ADDR");
    if (!addr || !*addr) addr = "127.0.0.1:8080";
    const char *w = getenv("WORKERS");
    char *end = NULL;
    long workers = w && *w ? strtol(w, &end, 10) : 1;
    if ((end && *end) || workers < 1 || workers > 1024) {
        fprintf(stderr, "WORKERS=%s is not a positive integer\n", w);
        return 2;
    }

    /* Split host:port at the last colon; strip [] around an IPv6 host. */
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host) {
        fprintf(stderr, "ADDR=%s is not host:port\n", addr);
        return 2;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') {
        h[strlen(h) - 1] = '\0';
        h++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    int rc = getaddrinfo(h, colon + 1, &hints, &listen_addr);
    if (rc != 0) {
        fprintf(stderr, "ADDR=%s: %s\n", addr, gai_strerror(rc));
        return 2;
    }
    choose_variants();
    signal(SIGPIPE, SIG_IGN);

    pthread_t *threads = calloc((size_t)workers, sizeof *threads);
    if (!threads) die("calloc");
    for (long i = 0; i < workers; i++)
        if ((errno = pthread_create(&threads[i], NULL, worker, NULL)) != 0) die("pthread_create");
    for (long i = 0; i < workers; i++) pthread_join(threads[i], NULL);
    return 0;
}
