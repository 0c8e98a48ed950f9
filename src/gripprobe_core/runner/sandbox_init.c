/* PID 1 of every sandboxed phase, compiled: the same contract as sandbox_init.py, without an interpreter's start.

   bwrap runs it (--as-pid-1) in the phase's own PID and network namespaces, as
       sandbox_init [--forward PORT=SOCKET ...] [--gate FD] [--exit-note FD] [-C DIR] -- COMMAND ...
   It
   1. makes itself untraceable (PR_SET_DUMPABLE 0): the agent, without capabilities, can neither ptrace
      this process nor read or write its memory;
   2. listens inside the namespace on 127.0.0.1:PORT (and [::1]:PORT when IPv6 is there) for every
      --forward and relays each connection to the Unix socket SOCKET, behind which the harness reaches
      the real endpoint (runner/netbridge.py);
   3. with --gate FD (a pre-started sandbox: runner/process.py Gate), waits until one byte can be read from
      FD, the harness's "go", then closes FD (the command never gets it); when FD ends instead (the harness
      closed it: the phase was given up) it exits 125 at once, silently, having started nothing;
   4. starts COMMAND in DIR (PWD set to DIR) with default signal dispositions and an empty signal mask,
      reaps whatever is orphaned to it, and exits with COMMAND's status (128 + N when signal N ended it)
      as soon as COMMAND ends: its exit ends the PID namespace, and the kernel kills every process left;
   5. with --exit-note FD (the write end of a pipe, close-on-exec here: the command never gets it), writes
      one byte to FD the moment COMMAND has ended, before its own exit: the harness's clock stops at the
      agent's end, not after the namespace's teardown and bwrap's exit (~0.35-1 ms later). The agent cannot
      write it: it never holds FD and cannot trace this process (1).
   When the sandbox cannot be set up it exits 125 with one line on stderr (never the agent's status).

   The relay is one thread on epoll, every socket non-blocking: each direction of a connection has one
   buffer of CHUNK bytes, read into only when empty and written out before the next read (a slow reader
   holds its writer back; nothing grows), a half-close is passed on as shutdown(SHUT_WR), and a
   connection is closed when both directions have ended. Connections are capped (MAX_CONNS); past it, or
   when descriptors or memory run out, accepting pauses and the kernel's backlog waits. When the harness's
   socket refuses a connect (its backlog is full), connections queue: the oldest tries again every RETRY_MS
   and the rest follow it as soon as it goes through (no busy loop, no order lost). The main thread
   only waits for children. Signals: none is handled, so none sent from inside the namespace reaches
   PID 1; writes use MSG_NOSIGNAL. Every system call's result is checked.

   Compiled by the harness (runner/sandbox_build.py) with the system's C compiler, cached by the sha256
   of this file and the compiler's version. */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SETUP_FAILED 125
#define CHUNK 65536
#define MAX_CONNS 1024
#define BACKLOG 256
#define ACCEPT_BATCH 64
#define PAUSE_MS 50     /* accepting pauses this long when descriptors or memory run out */
#define RETRY_MS 5      /* while the harness's socket refuses connects (EAGAIN: its backlog is full), the oldest
                           connection waiting for it tries again this often; the others wait behind it */
#define MAX_EVENTS 128

static void say(const char *prefix, const char *fmt, va_list ap) {
    char line[1024];
    int n = snprintf(line, sizeof line, "%s", prefix);
    if (n < 0 || (size_t)n >= sizeof line) n = 0;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    if (m < 0) m = 0;
    size_t len = (size_t)n + ((size_t)m < sizeof line - (size_t)n - 1 ? (size_t)m : sizeof line - (size_t)n - 2);
    line[len++] = '\n';
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(2, line + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break; /* stderr is gone: nothing else to tell */
        off += (size_t)w;
    }
}

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say("gripprobe sandbox init: ", fmt, ap);
    va_end(ap);
    _exit(SETUP_FAILED);
}

static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void complain(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say("gripprobe sandbox: ", fmt, ap);
    va_end(ap);
}

static long now_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) fail("clock_gettime: %s", strerror(errno));
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------------------------ arguments */

struct forward { int port; const char *path; };

struct target {              /* a Unix socket of the harness, and the connections waiting to reach it */
    const char *path;
    size_t waiting;          /* in the pending queue */
    int refused;             /* it answered EAGAIN in this round of retries */
};

static int parse_fd(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 9) return -1;
    int fd = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        fd = fd * 10 + (s[i] - '0');
    }
    return fd > 2 ? fd : -1; /* never stdin, stdout or stderr */
}

static int parse_port(const char *s, size_t n) {
    if (n == 0 || n > 5) return -1;
    int port = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        port = port * 10 + (s[i] - '0');
    }
    return port > 0 && port < 65536 ? port : -1;
}

/* -------------------------------------------------------------------------------------------- relay */

enum kind { K_LISTENER, K_SIDE };

struct listener {
    enum kind kind;          /* first: what an epoll event's pointer points at */
    int fd;
    struct target *to;       /* the Unix socket its connections are relayed to */
    int registered;
};

struct conn;

struct side {
    enum kind kind;
    int fd;
    struct conn *c;
    uint32_t events;         /* what it is registered for; 0: not registered */
};

struct dir {                 /* one direction of a connection: bytes read from src, not yet written to dst */
    char *buf;
    size_t len, off;
    int eof;                 /* src ended (EOF or error) or dst failed: nothing more is read */
    int done;                /* ended and passed on (dst shut for writing, or dst gone) */
    int dst_dead;            /* writing to dst failed: what is buffered is dropped */
};

struct conn {
    struct side tcp, up;     /* the agent's connection; the harness's Unix socket */
    struct dir out, back;    /* tcp -> up; up -> tcp */
    struct target *to;
    int connected;
    int closed;
    struct conn *next;       /* in the pending queue (not yet connected) or the closed list */
};

static int ep = -1;
static struct listener *listeners;
static size_t n_listeners;
static size_t n_conns;
static long paused_until;
static struct conn *pending, **pending_tail = &pending; /* FIFO: the oldest first */
static struct conn *graveyard;

/* 0, or -1 when the kernel refuses (out of memory or watches: the caller gives the connection up) */
static int set_events(struct side *s, uint32_t want) {
    if (s->fd < 0 || want == s->events) return 0;
    struct epoll_event ev = {.events = want, .data.ptr = s};
    int op = s->events == 0 ? EPOLL_CTL_ADD : want == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    if (epoll_ctl(ep, op, s->fd, &ev) != 0) return -1;
    s->events = want;
    return 0;
}

static void close_conn(struct conn *c) {
    if (c->closed) return;
    /* a descriptor's close takes it out of the epoll set anyway: a failed removal changes nothing */
    int gone = set_events(&c->tcp, 0);
    gone |= set_events(&c->up, 0);
    (void)gone;
    if (c->tcp.fd >= 0 && close(c->tcp.fd) != 0 && errno != EINTR) complain("close: %s", strerror(errno));
    if (c->up.fd >= 0 && close(c->up.fd) != 0 && errno != EINTR) complain("close: %s", strerror(errno));
    c->tcp.fd = c->up.fd = -1;
    free(c->out.buf);
    free(c->back.buf);
    c->out.buf = c->back.buf = NULL;
    c->closed = 1;
    n_conns--;
    c->next = graveyard; /* freed after the current batch of events, which may still name it */
    graveyard = c;
}

/* Move what one direction can move now; returns -1 when the connection must go (no memory). */
static int pump(struct dir *d, int src, int dst) {
    for (int round = 0; round < 4; round++) {
        int moved = 0;
        if (!d->eof && d->len == 0) {
            if (d->buf == NULL && (d->buf = malloc(CHUNK)) == NULL) return -1;
            ssize_t n = recv(src, d->buf, CHUNK, 0);
            if (n > 0) {
                d->len = (size_t)n;
                d->off = 0;
                moved = 1;
            } else if (n == 0) {
                d->eof = 1;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                d->eof = 1; /* reset or worse: this direction ends, what the other one carries goes on */
            }
        }
        if (d->len > d->off) {
            ssize_t n = send(dst, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL);
            if (n > 0) {
                d->off += (size_t)n;
                moved = 1;
                if (d->off == d->len) d->len = d->off = 0;
            } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                d->len = d->off = 0; /* its reader is gone: drop it, read no more */
                d->eof = d->dst_dead = 1;
            }
        }
        if (!moved) break;
    }
    if (d->eof && d->len == 0 && !d->done) {
        d->done = 1;
        /* the half-close passed on; ENOTCONN when the peer is already gone, which is what it means too */
        if (!d->dst_dead && shutdown(dst, SHUT_WR) != 0 && errno != ENOTCONN) d->dst_dead = 1;
    }
    if (d->done && d->buf != NULL) {
        free(d->buf);
        d->buf = NULL;
    }
    return 0;
}

static void update(struct conn *c) {
    if (c->closed) return;
    if (c->out.done && c->back.done) {
        close_conn(c);
        return;
    }
    uint32_t t = 0, u = 0;
    if (!c->out.eof && c->out.len == 0) t |= EPOLLIN;
    if (c->back.len > c->back.off) t |= EPOLLOUT;
    if (!c->back.eof && c->back.len == 0) u |= EPOLLIN;
    if (c->out.len > c->out.off) u |= EPOLLOUT;
    /* a side with nothing to wait for is not registered: a hung-up socket would report EPOLLHUP forever */
    if (set_events(&c->tcp, t) != 0 || set_events(&c->up, u) != 0) close_conn(c);
}

static void serve(struct conn *c) {
    if (c->closed) return;
    if (pump(&c->out, c->tcp.fd, c->up.fd) != 0 || pump(&c->back, c->up.fd, c->tcp.fd) != 0) {
        close_conn(c);
        return;
    }
    update(c);
}

/* 1: connected (or closed for good); 0: the harness's backlog is full, try again later. */
static int try_connect(struct conn *c) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) return 0;
        close_conn(c);
        return 1;
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, c->to->path, strlen(c->to->path)); /* its length was checked when parsed */
    int rc;
    do rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    while (rc != 0 && errno == EINTR);
    if (rc != 0 && errno != EINPROGRESS) {
        int again = errno == EAGAIN;
        if (close(fd) != 0 && errno != EINTR) complain("close: %s", strerror(errno));
        if (again) return 0;
        close_conn(c); /* nothing behind the socket: the agent's connection ends, as a refused one would */
        return 1;
    }
    c->up.fd = fd;
    c->connected = 1;
    serve(c);
    return 1;
}

static void queue(struct conn *c) {
    c->next = NULL;
    *pending_tail = c;
    pending_tail = &c->next;
    c->to->waiting++;
}

/* The waiting connections try again, oldest first, until their socket refuses one: the ones behind it wait
   for the next round (the backlog that refused it refuses them too). 1 when some are still waiting. */
static int retry_pending(void) {
    for (struct conn *c = pending; c != NULL; c = c->next) c->to->refused = 0;
    struct conn **at = &pending;
    while (*at != NULL) {
        struct conn *c = *at;
        if (c->to->refused) {
            at = &c->next;
            continue;
        }
        *at = c->next;
        if (*at == NULL) pending_tail = at;
        c->to->waiting--;
        c->next = NULL;
        if (try_connect(c)) continue;
        c->to->refused = 1; /* back where it was */
        c->to->waiting++;
        c->next = *at;
        *at = c;
        if (c->next == NULL) pending_tail = &c->next;
        at = &c->next;
    }
    return pending != NULL;
}

static void listen_again(void) {
    int want = n_conns < MAX_CONNS && now_ms() >= paused_until;
    for (size_t i = 0; i < n_listeners; i++) {
        struct listener *l = &listeners[i];
        if (want == l->registered) continue;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
        if (epoll_ctl(ep, want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, l->fd, &ev) == 0) l->registered = want;
        else if (want) paused_until = now_ms() + PAUSE_MS; /* no watch to be had now: try again shortly */
        else fail("epoll_ctl: %s", strerror(errno));
    }
}

static void accept_from(struct listener *l) {
    for (int i = 0; i < ACCEPT_BATCH && n_conns < MAX_CONNS; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == ENETDOWN ||
                errno == ENOPROTOOPT || errno == EHOSTDOWN || errno == ENONET || errno == EHOSTUNREACH ||
                errno == EOPNOTSUPP || errno == ENETUNREACH || errno == EPERM)
                continue; /* that connection is gone; the next may be fine */
            paused_until = now_ms() + PAUSE_MS; /* out of descriptors or memory (a flood): the backlog waits */
            return;
        }
        int one = 1;
        /* small writes go out at once (a stream of model tokens); a socket refusing it still relays */
        if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
            /* not fatal: the connection still relays, only small writes may wait a little */
        }
        struct conn *c = calloc(1, sizeof *c);
        if (c == NULL) {
            if (close(fd) != 0 && errno != EINTR) complain("close: %s", strerror(errno));
            paused_until = now_ms() + PAUSE_MS;
            return;
        }
        c->tcp = (struct side){K_SIDE, fd, c, 0};
        c->up = (struct side){K_SIDE, -1, c, 0};
        c->to = l->to;
        n_conns++;
        if (c->to->waiting > 0 || !try_connect(c)) queue(c); /* behind the ones already waiting */
    }
}

static void *relay(void *arg) {
    (void)arg;
    struct epoll_event events[MAX_EVENTS];
    long due = -1; /* when connections wait for a harness socket: RETRY_MS */
    for (;;) {
        listen_again();
        long timeout = due;
        if (paused_until > 0) {
            long left = paused_until - now_ms();
            if (left <= 0) { /* the pause is over: listen again before waiting */
                paused_until = 0;
                continue;
            }
            if (timeout < 0 || left < timeout) timeout = left;
        }
        int n = epoll_wait(ep, events, MAX_EVENTS, (int)timeout);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("epoll_wait: %s", strerror(errno));
        }
        for (int i = 0; i < n; i++) {
            enum kind *k = events[i].data.ptr;
            if (*k == K_LISTENER) accept_from((struct listener *)k);
            else serve(((struct side *)k)->c);
        }
        due = pending != NULL && retry_pending() ? RETRY_MS : -1;
        while (graveyard != NULL) {
            struct conn *c = graveyard;
            graveyard = c->next;
            free(c);
        }
    }
    return NULL;
}

static void listen_on(int port, struct target *to, struct listener *out, size_t *n) {
    for (int v6 = 0; v6 < 2; v6++) {
        int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1, rc = fd < 0 ? -1 : 0;
        if (rc == 0) rc = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (rc == 0 && v6) rc = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (rc == 0) {
            if (v6) {
                struct sockaddr_in6 a;
                memset(&a, 0, sizeof a);
                a.sin6_family = AF_INET6;
                a.sin6_port = htons((uint16_t)port);
                a.sin6_addr = in6addr_loopback;
                rc = bind(fd, (struct sockaddr *)&a, sizeof a);
            } else {
                struct sockaddr_in a;
                memset(&a, 0, sizeof a);
                a.sin_family = AF_INET;
                a.sin_port = htons((uint16_t)port);
                a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                rc = bind(fd, (struct sockaddr *)&a, sizeof a);
            }
        }
        if (rc == 0) rc = listen(fd, BACKLOG);
        if (rc != 0) {
            int err = errno;
            if (fd >= 0 && close(fd) != 0 && errno != EINTR) complain("close: %s", strerror(errno));
            if (!v6) fail("cannot listen on 127.0.0.1:%d inside the sandbox: %s", port, strerror(err));
            continue; /* ::1 is optional (no IPv6 here), 127.0.0.1 is not */
        }
        out[*n] = (struct listener){K_LISTENER, fd, to, 0};
        (*n)++;
    }
}

/* ---------------------------------------------------------------------------------------- the agent */

/* The harness's "go" on the gate: returns when one byte came; exits 125 (nothing started) when the gate
   ended without one. The gate is closed either way: neither the command nor the relay holds it. */
static void wait_for_go(int gate) {
    char go;
    ssize_t n;
    do n = read(gate, &go, 1);
    while (n < 0 && errno == EINTR);
    int err = errno;
    if (close(gate) != 0 && errno != EINTR) complain("close: %s", strerror(errno));
    if (n == 1) return;
    if (n < 0) fail("cannot read the gate: %s", strerror(err));
    _exit(SETUP_FAILED); /* given up before its start: silent, nothing ran */
}

static pid_t start(const char *cwd, char **command) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    /* the child: what a freshly started process expects */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        if (sigaction(sig, &dfl, NULL) != 0 && errno != EINVAL) { /* EINVAL: the C library's own signals */
            complain("cannot reset signal %d for '%.200s': %s", sig, command[0], strerror(errno));
            _exit(127);
        }
    }
    sigset_t none;
    if (sigemptyset(&none) != 0 || sigprocmask(SIG_SETMASK, &none, NULL) != 0) {
        complain("cannot clear the signal mask for '%.200s': %s", command[0], strerror(errno));
        _exit(127);
    }
    if (cwd != NULL) {
        if (chdir(cwd) != 0) {
            complain("cannot run '%.200s': cannot enter '%.200s': %s", command[0], cwd, strerror(errno));
            _exit(127);
        }
        if (setenv("PWD", cwd, 1) != 0) {
            complain("cannot run '%.200s': cannot set PWD: %s", command[0], strerror(errno));
            _exit(127);
        }
    }
    execvp(command[0], command);
    complain("cannot run '%.200s': %s", command[0], strerror(errno));
    _exit(127);
}

static void reap(pid_t agent, int note) {
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, __WALL); /* __WALL: children cloned with any exit signal too */
        if (pid < 0) {
            if (errno == EINTR) continue;
            fail("waitpid: %s", strerror(errno)); /* ECHILD cannot happen while the agent lives */
        }
        if (pid == agent) {
            if (note >= 0) { /* a failed write (the harness gave up reading) changes nothing: bwrap's exit says it */
                ssize_t n;
                do n = write(note, "x", 1);
                while (n < 0 && errno == EINTR);
            }
            if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
            if (WIFSIGNALED(status)) _exit(128 + WTERMSIG(status));
        }
    }
}

int main(int argc, char **argv) {
    struct forward *forwards = calloc((size_t)argc + 1, sizeof *forwards);
    if (forwards == NULL) fail("out of memory");
    size_t n_forwards = 0;
    const char *cwd = NULL;
    int gate = -1, note = -1;
    char **command = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            command = argv + i + 1;
            break;
        }
        if (strcmp(a, "--forward") == 0 && i + 1 < argc) {
            const char *spec = argv[++i];
            const char *eq = strchr(spec, '=');
            int port = eq == NULL ? -1 : parse_port(spec, (size_t)(eq - spec));
            if (port < 0 || eq[1] == '\0') fail("bad --forward '%.200s' (PORT=SOCKET)", spec);
            if (strlen(eq + 1) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                fail("bad --forward '%.200s': the socket's path is too long", spec);
            size_t k = 0;
            while (k < n_forwards && forwards[k].port != port) k++;
            forwards[k] = (struct forward){port, eq + 1}; /* the last one for a port counts */
            if (k == n_forwards) n_forwards++;
        } else if (strcmp(a, "--gate") == 0 && i + 1 < argc) {
            gate = parse_fd(argv[++i]);
            struct stat st;
            if (gate < 0 || fstat(gate, &st) != 0 || !S_ISFIFO(st.st_mode))
                fail("bad --gate '%.200s' (the read end of a pipe)", argv[i]);
        } else if (strcmp(a, "--exit-note") == 0 && i + 1 < argc) {
            note = parse_fd(argv[++i]);
            struct stat st;
            if (note < 0 || fstat(note, &st) != 0 || !S_ISFIFO(st.st_mode) || fcntl(note, F_SETFD, FD_CLOEXEC) != 0)
                fail("bad --exit-note '%.200s' (the write end of a pipe)", argv[i]);
        } else if (strcmp(a, "-C") == 0 && i + 1 < argc) {
            cwd = argv[++i];
        } else {
            fail("unexpected argument '%.200s'", a);
        }
    }
    if (command == NULL || command[0] == NULL) fail("no command (… -- COMMAND)");
    if (note >= 0) { /* a closed reader must not end this process (run outside a PID namespace, it would) */
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        if (sigaction(SIGPIPE, &ign, NULL) != 0) fail("sigaction: %s", strerror(errno));
    }
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        fail("cannot make the sandbox's init untraceable: %s", strerror(errno));

    listeners = calloc(2 * n_forwards + 1, sizeof *listeners);
    struct target *targets = calloc(n_forwards + 1, sizeof *targets);
    if (listeners == NULL || targets == NULL) fail("out of memory");
    for (size_t i = 0; i < n_forwards; i++) {
        targets[i].path = forwards[i].path;
        listen_on(forwards[i].port, &targets[i], listeners, &n_listeners);
    }
    if (n_listeners > 0 && (ep = epoll_create1(EPOLL_CLOEXEC)) < 0) fail("epoll_create1: %s", strerror(errno));

    if (gate >= 0) wait_for_go(gate);
    /* the listeners are close-on-exec; they queue connections until the relay accepts them */
    pid_t agent = start(cwd, command);
    if (agent < 0) fail("cannot start '%.200s': fork: %s", command[0], strerror(errno));
    if (n_listeners > 0) {
        pthread_attr_t attr;
        pthread_t thread;
        int rc = pthread_attr_init(&attr);
        if (rc == 0) rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (rc == 0) rc = pthread_create(&thread, &attr, relay, NULL);
        if (rc != 0) {
            if (kill(agent, SIGKILL) != 0) complain("kill: %s", strerror(errno));
            fail("cannot start the network relay: %s", strerror(rc));
        }
    }
    reap(agent, note);
    return SETUP_FAILED; /* not reached */
}
