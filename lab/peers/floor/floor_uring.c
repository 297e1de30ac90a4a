/*
 * floor_uring: the floor (floor.c) on io_uring. NOT an HTTP server.
 *
 * The same not-a-server loop as floor.c, so that the two floors can be compared: it reads whatever
 * arrives, counts "\r\n\r\n" sequences (memmem, exactly as floor.c does) and answers each one with
 * the same fixed "Hello, World!" response bytes (Server: floor, a Date refreshed once a second). No
 * parsing, no validation, no routing; a request with a body would be miscounted.
 *
 * What differs is only the I/O: one io_uring per thread, set up with IORING_SETUP_SINGLE_ISSUER +
 * IORING_SETUP_DEFER_TASKRUN (completion work runs only when this thread asks for events; falls back
 * to COOP_TASKRUN, then to a plain ring, with a message on stderr, if the kernel refuses), one
 * multishot accept on the listener, one multishot recv per connection drawing from a provided-buffer
 * ring (a buffer goes back to the ring as soon as its terminators are counted), and sends batched:
 * after a turn's completions are handled, every connection that owes answers gets ONE send of all it
 * owes, and all those sends go to the kernel in the same io_uring_enter that waits for the next
 * completions. Every send reads from one per-thread buffer of back-to-back copies of the response
 * (all answers are the same bytes), so a send needs no per-connection buffer; at most one send per
 * connection is in flight, and a short send is continued from where it stopped.
 *
 * Exit status 3 and a message when io_uring itself is unavailable (kernel.io_uring_disabled,
 * seccomp, an old kernel), so that callers can tell that apart from a bug.
 *
 * Environment: ADDR (host:port, default 127.0.0.1:8080), WORKERS (threads, default 1; each has its
 * own SO_REUSEPORT listener and ring).
 * Build: gcc -O2 -pthread -o floor_uring floor_uring.c -luring   (Debian: liburing-dev)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SQ_ENTRIES 4096
#define CQ_ENTRIES 16384
#define BUF_GROUP 1
#define BUF_COUNT 4096 /* provided buffers (a power of two) */
#define BUF_SIZE 4096  /* bytes each: a longer read simply spans several completions */
#define SEND_BUF (64 * 1024)

static const char BODY[] = "Hello, World!";
/* "Date: " + 29 characters of IMF-fixdate */
#define DATE_LEN 29

/* The operation a completion belongs to, kept in the low bits of user_data (conn is 8-aligned). */
enum op { OP_ACCEPT = 0, OP_RECV = 1, OP_SEND = 2 };

struct response {
    char bytes[256];
    size_t len;
    size_t date_at; /* offset of the date value inside bytes */
    time_t second;  /* second the date was rendered for */
};

/* Per-connection state: the terminator matcher, answers owed, and the operations in flight. */
struct conn {
    int fd;
    int matched;        /* characters of "\r\n\r\n" matched so far (0..3) */
    unsigned long owed; /* whole responses still to send */
    size_t partial;     /* bytes of the current response already sent */
    int recv_armed;     /* the multishot recv is live */
    int send_inflight;  /* one send is in flight */
    int closing;        /* EOF or error seen: free once nothing is in flight */
    int queued;         /* on the turn's list of connections to send to */
    struct conn *next_queued;
};

struct worker {
    struct io_uring ring;
    struct io_uring_buf_ring *bufs_ring;
    char *bufs;
    unsigned bufs_returned; /* buffers given back this turn, published once per turn */
    char *send_buf;         /* back-to-back copies of the response */
    size_t per_send;        /* whole responses in send_buf */
    struct response r;
    struct conn *queue; /* connections that owe answers and have no send in flight */
    int lfd;
};

static struct addrinfo *listen_addr;

static void render_response(struct response *r) {
    r->len = (size_t)snprintf(r->bytes, sizeof r->bytes,
                              "HTTP/1.1 200 OK\r\nServer: floor\r\nDate: %*s\r\n"
                              "Content-Type: text/plain\r\nContent-Length: %zu\r\n\r\n%s",
                              DATE_LEN, "", sizeof BODY - 1, BODY);
    r->date_at = (size_t)(strstr(r->bytes, "Date: ") - r->bytes) + 6;
    r->second = 0;
}

/* Re-renders the date once a second into every copy of the response in the send buffer. Sends in
 * flight are not torn by this: with DEFER_TASKRUN (and for sockets, which never go to io-wq) the
 * kernel copies send data only inside this thread's io_uring_enter, never while this runs. */
static void refresh_date(struct worker *w) {
    struct response *r = &w->r;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    if (now.tv_sec == r->second) return;
    r->second = now.tv_sec;
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    char date[DATE_LEN + 1];
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    memcpy(r->bytes + r->date_at, date, DATE_LEN);
    for (size_t i = 0; i < w->per_send; i++)
        memcpy(w->send_buf + i * r->len + r->date_at, date, DATE_LEN);
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void die_errno(const char *what, int err) {
    errno = err;
    die(what);
}

static int open_listener(void) {
    int fd = socket(listen_addr->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) die("SO_REUSEADDR");
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) die("SO_REUSEPORT");
    if (bind(fd, listen_addr->ai_addr, listen_addr->ai_addrlen) < 0) die("bind ADDR");
    if (listen(fd, 4096) < 0) die("listen");
    return fd;
}

/* Identical to floor.c's (the lab branch's memmem version), so both floors do the same user work:
 * counts the "\r\n\r\n" in in[0..n), continuing a match of *matched (0..3) bytes left by the
 * previous read; leaves in *matched the bytes of a terminator begun at the end. */
static unsigned long count_terminators(const char *in, size_t n, int *matched) {
    static const char END[4] = {'\r', '\n', '\r', '\n'};
    unsigned long found = 0;
    size_t i = 0;
    int m = *matched;
    while (m != 0 && i < n) {
        char ch = in[i++];
        if (ch == END[m]) {
            if (++m == 4) {
                found++;
                m = 0;
            }
        } else {
            m = ch == '\r';
        }
    }
    if (m != 0) { /* the whole read continued a match */
        *matched = m;
        return found;
    }
    const char *p = in + i, *end = in + n, *hit;
    while ((hit = memmem(p, (size_t)(end - p), END, 4)) != NULL) {
        found++;
        p = hit + 4;
    }
    /* The longest tail of the unmatched rest that begins a terminator. */
    m = 0;
    for (int k = 3; k > 0; k--) {
        if (end - p >= k && memcmp(end - k, END, (size_t)k) == 0) {
            m = k;
            break;
        }
    }
    *matched = m;
    return found;
}

/* An SQE, submitting what is queued first if the submission queue is full. */
static struct io_uring_sqe *get_sqe(struct worker *w) {
    struct io_uring_sqe *sqe;
    while ((sqe = io_uring_get_sqe(&w->ring)) == NULL) {
        int rc = io_uring_submit(&w->ring);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) die_errno("io_uring_submit", -rc);
    }
    return sqe;
}

static void arm_accept(struct worker *w) {
    struct io_uring_sqe *sqe = get_sqe(w);
    io_uring_prep_multishot_accept(sqe, w->lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, OP_ACCEPT);
}

static void arm_recv(struct worker *w, struct conn *c) {
    struct io_uring_sqe *sqe = get_sqe(w);
    io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BUF_GROUP;
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | OP_RECV);
    c->recv_armed = 1;
}

/* One send of everything owed (up to a send buffer's worth), continuing a short send. */
static void send_owed(struct worker *w, struct conn *c) {
    size_t n = c->owed < w->per_send ? c->owed : w->per_send;
    struct io_uring_sqe *sqe = get_sqe(w);
    io_uring_prep_send(sqe, c->fd, w->send_buf + c->partial, n * w->r.len - c->partial, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | OP_SEND);
    c->send_inflight = 1;
}

static void enqueue(struct worker *w, struct conn *c) {
    if (c->queued || c->send_inflight || c->closing || c->owed == 0) return;
    c->queued = 1;
    c->next_queued = w->queue;
    w->queue = c;
}

/* Marks the connection done; frees it once its kernel operations have all completed. A shutdown
 * ends a still-armed multishot recv (the kernel holds its own file reference, so close would not). */
static void finish(struct conn *c) {
    if (!c->closing) {
        c->closing = 1;
        if (c->recv_armed) shutdown(c->fd, SHUT_RDWR);
    }
    if (c->recv_armed || c->send_inflight || c->queued) return;
    close(c->fd);
    free(c);
}

static void give_back_buffer(struct worker *w, unsigned bid) {
    io_uring_buf_ring_add(w->bufs_ring, w->bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, (unsigned short)bid,
                          io_uring_buf_ring_mask(BUF_COUNT), (int)w->bufs_returned);
    w->bufs_returned++;
}

static void on_accept(struct worker *w, struct io_uring_cqe *cqe) {
    if (!(cqe->flags & IORING_CQE_F_MORE)) arm_accept(w); /* the multishot ended: re-arm it */
    if (cqe->res < 0) return;                             /* e.g. EMFILE; the listener stays */
    int one = 1;
    setsockopt(cqe->res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct conn *c = calloc(1, sizeof *c);
    if (!c) die("calloc");
    c->fd = cqe->res;
    arm_recv(w, c);
}

static void on_recv(struct worker *w, struct conn *c, struct io_uring_cqe *cqe) {
    int more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    if (!more) c->recv_armed = 0;
    if (cqe->res > 0) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        if (!c->closing)
            c->owed += count_terminators(w->bufs + (size_t)bid * BUF_SIZE, (size_t)cqe->res, &c->matched);
        give_back_buffer(w, bid);
    }
    if (c->closing) {
        finish(c);
        return;
    }
    if (cqe->res == 0 || (cqe->res < 0 && cqe->res != -ENOBUFS)) {
        finish(c); /* EOF or error */
        return;
    }
    if (!more) arm_recv(w, c); /* ran out of provided buffers (or the kernel ended it): re-arm */
    enqueue(w, c);
}

static void on_send(struct worker *w, struct conn *c, struct io_uring_cqe *cqe) {
    c->send_inflight = 0;
    if (c->closing) {
        finish(c);
        return;
    }
    if (cqe->res < 0) {
        if (cqe->res != -EINTR && cqe->res != -EAGAIN) {
            finish(c);
            return;
        }
    } else {
        size_t done = c->partial + (size_t)cqe->res;
        c->owed -= done / w->r.len;
        c->partial = done % w->r.len;
    }
    enqueue(w, c);
}

/* A ring with SINGLE_ISSUER + DEFER_TASKRUN, or the best the kernel accepts, said on stderr. */
static void setup_ring(struct io_uring *ring) {
    static const struct {
        unsigned flags;
        const char *name;
    } tries[] = {
        {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, "SINGLE_ISSUER|DEFER_TASKRUN"},
        {IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN"},
        {0, "no setup flags"},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        struct io_uring_params p = {.flags = tries[i].flags | IORING_SETUP_CQSIZE, .cq_entries = CQ_ENTRIES};
        rc = io_uring_queue_init_params(SQ_ENTRIES, ring, &p);
        if (rc == 0) {
            if (i > 0) fprintf(stderr, "floor_uring: the kernel refused %s; running with %s\n", tries[0].name, tries[i].name);
            return;
        }
        if (rc != -EINVAL) break; /* not a flag problem: io_uring itself is unavailable */
    }
    fprintf(stderr, "floor_uring: io_uring is unavailable here (io_uring_queue_init: %s)\n", strerror(-rc));
    exit(3);
}

static void setup_buffers(struct worker *w) {
    size_t ring_bytes = BUF_COUNT * sizeof(struct io_uring_buf);
    void *mem = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) die("mmap buffer ring");
    w->bufs_ring = mem;
    io_uring_buf_ring_init(w->bufs_ring);
    struct io_uring_buf_reg reg = {.ring_addr = (uint64_t)(uintptr_t)mem, .ring_entries = BUF_COUNT, .bgid = BUF_GROUP};
    int rc = io_uring_register_buf_ring(&w->ring, &reg, 0);
    if (rc < 0) {
        fprintf(stderr, "floor_uring: provided-buffer rings are unavailable (%s)\n", strerror(-rc));
        exit(3);
    }
    w->bufs = malloc((size_t)BUF_COUNT * BUF_SIZE);
    if (!w->bufs) die("malloc");
    for (unsigned bid = 0; bid < BUF_COUNT; bid++) give_back_buffer(w, bid);
    io_uring_buf_ring_advance(w->bufs_ring, (int)w->bufs_returned);
    w->bufs_returned = 0;
}

static void *worker(void *arg) {
    (void)arg;
    struct worker *w = calloc(1, sizeof *w);
    if (!w) die("calloc");
    w->lfd = open_listener();
    setup_ring(&w->ring);
    setup_buffers(w);
    render_response(&w->r);
    w->per_send = SEND_BUF / w->r.len;
    w->send_buf = malloc(w->per_send * w->r.len);
    if (!w->send_buf) die("malloc");
    for (size_t i = 0; i < w->per_send; i++) memcpy(w->send_buf + i * w->r.len, w->r.bytes, w->r.len);
    arm_accept(w);
    for (;;) {
        /* Submits the last turn's sends and re-arms, and waits for completions, in one syscall. */
        int rc = io_uring_submit_and_wait(&w->ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME) die_errno("io_uring_submit_and_wait", -rc);
        refresh_date(w);
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&w->ring, head, cqe) {
            seen++;
            uint64_t data = io_uring_cqe_get_data64(cqe);
            struct conn *c = (struct conn *)(uintptr_t)(data & ~(uint64_t)3);
            switch ((enum op)(data & 3)) {
            case OP_ACCEPT: on_accept(w, cqe); break;
            case OP_RECV: on_recv(w, c, cqe); break;
            case OP_SEND: on_send(w, c, cqe); break;
            }
        }
        io_uring_cq_advance(&w->ring, seen);
        if (w->bufs_returned) {
            io_uring_buf_ring_advance(w->bufs_ring, (int)w->bufs_returned);
            w->bufs_returned = 0;
        }
        /* The batch: one send per connection that owes answers. */
        while (w->queue) {
            struct conn *c = w->queue;
            w->queue = c->next_queued;
            c->queued = 0;
            if (c->closing)
                finish(c);
            else
                send_owed(w, c);
        }
    }
    return NULL;
}

int main(void) {
    const char *addr = getenv("ADDR");
    if (!addr || !*addr) addr = "127.0.0.1:8080";
    const char *wk = getenv("WORKERS");
    char *end = NULL;
    long workers = wk && *wk ? strtol(wk, &end, 10) : 1;
    if ((end && *end) || workers < 1 || workers > 1024) {
        fprintf(stderr, "WORKERS=%s is not a positive integer\n", wk);
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
    signal(SIGPIPE, SIG_IGN);

    pthread_t *threads = calloc((size_t)workers, sizeof *threads);
    if (!threads) die("calloc");
    for (long i = 0; i < workers; i++)
        if ((errno = pthread_create(&threads[i], NULL, worker, NULL)) != 0) die("pthread_create");
    for (long i = 0; i < workers; i++) pthread_join(threads[i], NULL);
    return 0;
}
