/*
 * floor: the lab's FLOOR program. NOT an HTTP server.
 *
 * It measures what the kernel and the loopback TCP stack cost per request, so that the servers'
 * figures can be read against it: each of WORKERS threads owns a SO_REUSEPORT listener and an epoll
 * loop, reads whatever arrives on ready sockets, counts "\r\n\r\n" sequences (memmem) and writes one fixed
 * "Hello, World!" response per sequence counted. No parsing, no validation, no routing: every
 * request, whatever its method or path, gets the same answer, so it serves only the "plaintext"
 * scenario. A request with a body would be miscounted; the lab never sends one here.
 *
 * The only concessions to the scenario contract are a Server header and a Date header refreshed
 * once a second (a vDSO clock read per loop turn), so that the lab's parity check passes honestly.
 *
 * Environment: ADDR (host:port, default 127.0.0.1:8080), WORKERS (threads, default 1).
 * Build: gcc -O2 -pthread -o floor floor.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_BUF (64 * 1024)
#define WRITE_BUF (64 * 1024)
#define MAX_EVENTS 256

static const char BODY[] = "Hello, World!";
/* "Date: " + 29 characters of IMF-fixdate */
#define DATE_LEN 29

struct response {
    char bytes[256];
    size_t len;
    size_t date_at; /* offset of the date value inside bytes */
    time_t second;  /* second the date was rendered for */
};

/* Per-connection state: where the "\r\n\r\n" matcher is, and answers not yet written. */
struct conn {
    int fd;
    int matched;       /* characters of "\r\n\r\n" matched so far (0..3) */
    unsigned long owed; /* whole responses still to write */
    size_t partial;    /* bytes of the current response already written */
    int want_out;      /* registered for EPOLLOUT (reading paused until drained) */
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
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

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

/* Writes what is owed; returns -1 if the connection failed, else 0 (possibly still owing). */
static int flush_owed(int ep, struct conn *c, struct response *r, char *out) {
    while (c->owed > 0) {
        size_t per = WRITE_BUF / r->len, n = c->owed < per ? c->owed : per, len = 0;
        for (size_t i = 0; i < n; i++, len += r->len) memcpy(out + len, r->bytes, r->len);
        ssize_t w = write(c->fd, out + c->partial, len - c->partial);
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

/* Counts the "\r\n\r\n" in in[0..n), continuing a match of *matched (0..3) bytes left by the
 * previous read; leaves in *matched the bytes of a terminator begun at the end. The scan is
 * memmem (glibc's two-way search, vectorised), not a loop over every byte: the floor must be as
 * cheap as a floor can be. Only a match already begun in the previous read is stepped byte by
 * byte (at most a few bytes); the tail is checked against the terminator's prefixes. */
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

/* Reads what is there, counts request terminators; returns -1 on EOF or error. */
static int read_requests(struct conn *c, char *in) {
    for (;;) {
        ssize_t n = read(c->fd, in, READ_BUF);
        if (n == 0) return -1;
        if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
        c->owed += count_terminators(in, (size_t)n, &c->matched);
        if (n < READ_BUF) return 0; /* drained (level-triggered epoll reports any rest) */
    }
}

static void *worker(void *arg) {
    (void)arg;
    int lfd = open_listener();
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}; /* NULL marks the listener */
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0) die("epoll_ctl listener");
    char *in = malloc(READ_BUF), *out = malloc(WRITE_BUF);
    struct response *r = malloc(sizeof *r);
    if (!in || !out || !r) die("malloc");
    render_response(r);
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
            if (flush_owed(ep, c, r, out) < 0) close_conn(ep, c);
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
    signal(SIGPIPE, SIG_IGN);

    pthread_t *threads = calloc((size_t)workers, sizeof *threads);
    if (!threads) die("calloc");
    for (long i = 0; i < workers; i++)
        if ((errno = pthread_create(&threads[i], NULL, worker, NULL)) != 0) die("pthread_create");
    for (long i = 0; i < workers; i++) pthread_join(threads[i], NULL);
    return 0;
}
