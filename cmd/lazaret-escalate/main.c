/*
 * lazaret-escalate — the Escalation Client's front end inside the sandbox.
 *
 * A Go program's start-up under gVisor costs 12-17 ms on the project's VM
 * (docs/PERFORMANCE.md, "Host Escalation"); this static C program costs
 * 6-9 ms. It does no escalation itself: it hands its argv, its working
 * directory and its LAZARET_* environment variables to the escalation
 * broker (`lazaret-escalate-go __broker`, started in the sandbox by the
 * coordinator), which runs the Go client's logic (certificates, signing,
 * mutual TLS with the coordinator), and it relays the answer: stdout and
 * stderr chunks to fd 1 and 2, then the exit code. It never interprets the
 * command line.
 *
 * In a session started by the lazaret CLI the broker is that session's
 * holder (`lazaret-escalate __session`, holder.c, LAZARET_SESSION_SOCKET),
 * which keeps the session's delegated key and has it signed only for its
 * own session's processes; otherwise it is the sandbox's shared broker.
 * The holder is this same program: `lazaret-escalate __session -- CMD`.
 *
 * If the broker cannot take the request (no socket, connection refused, an
 * answer other than its acknowledgement), this program execs the Go client
 * with the same argv, so escalation never depends on the broker. The
 * broker acknowledges a request before it contacts the coordinator, so a
 * request is never made twice: after the acknowledgement a failure is
 * reported (exit 125), not retried.
 *
 * Wire format (internal/insandbox/escclient/broker.go is the other side):
 *   request: "LZB1", u32 big-endian length N (<= MAX_REQ), then N bytes of
 *            strings, each a one-byte tag ('a' argument, 'c' working
 *            directory, 'e' NAME=VALUE) and the text, NUL-terminated;
 *   answer:  frames of a one-byte type, a u32 big-endian length and the
 *            data: 'k' (empty, the acknowledgement, always first), 'o'/'e'
 *            (stdout/stderr bytes, at most MAX_CHUNK), 'x' (4 bytes: the
 *            exit code, int32 big-endian, always last).
 *
 * No heap: the request and the answer use fixed static buffers; every
 * length is checked; reads and writes retry on EINTR and short counts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "holder.h"

#define DEFAULT_BROKER "/run/lazaret/escalate-broker/sock"
#define DEFAULT_GO "/run/lazaret/bin/lazaret-escalate-go"
#define ENV_BROKER "LAZARET_ESCALATE_BROKER"
/* The session holder's socket: in a session whose holder keeps the
 * delegated key, the holder is this session's broker and the only one
 * that can sign for it. */
#define ENV_SESSION "LAZARET_SESSION_SOCKET"
#define ENV_GO "LAZARET_ESCALATE_FALLBACK"
#define ENV_TRACE "LAZARET_ESCALATE_TRACE"
#define MAX_REQ (256 * 1024)
#define MAX_CHUNK (64 * 1024)
#define HDR 5
/* How long the broker may take to acknowledge (it does so as soon as it
 * has read the request). A hang guard, not a pace: 300 requests at once
 * on a loaded 2-core host took over 5 s for some (TestSecEscalationFlood). */
#define ACK_TIMEOUT_MS 20000
/* How long a full listen queue is waited out. */
#define CONNECT_WAIT_MS 10000

static unsigned char req[8 + MAX_REQ];
static size_t reqlen;
static unsigned char chunk[MAX_CHUNK];
static char cwd[4096];
static char **saved_argv;

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* go_client is the Go client's path. */
static const char *go_client(void)
{
	const char *go = getenv(ENV_GO);
	if (go == NULL || go[0] == '\0')
		go = DEFAULT_GO;
	return go;
}

/* fallback runs the Go client with this program's argv. */
static void fallback(int fd)
{
	const char *go = go_client();
	if (fd >= 0)
		close(fd);
	execv(go, saved_argv);
	{
		const char *msg = "lazaret-escalate: cannot run the Go client ";
		ssize_t r = write(2, msg, strlen(msg));
		r = write(2, go, strlen(go));
		r = write(2, "\n", 1);
		(void)r;
	}
	_exit(EXIT_FAILURE_CODE);
}

/* add appends tag, s and a NUL; 0 when the request would be too long. */
static int add(char tag, const char *s)
{
	size_t n = strlen(s);
	if (n > MAX_REQ || MAX_REQ - (reqlen - 8) < n + 2)
		return 0;
	req[reqlen++] = (unsigned char)tag;
	memcpy(req + reqlen, s, n);
	reqlen += n;
	req[reqlen++] = 0;
	return 1;
}

/* write_all writes p[0:n] to fd; 0 on error. */
static int write_all(int fd, const unsigned char *p, size_t n, int sock)
{
	while (n > 0) {
		ssize_t w = sock ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return 0;
		}
		if (w == 0)
			return 0;
		p += w;
		n -= (size_t)w;
	}
	return 1;
}

/* Answer reading: a small buffer in front of the socket, so that several
 * frames arriving together cost one read. */
static unsigned char rbuf[MAX_CHUNK + HDR];
static size_t rpos, rend;

/* read_full fills p[0:n] from the socket; 1 done, 0 end of stream or
 * error. */
static int read_full(int fd, unsigned char *p, size_t n)
{
	while (n > 0) {
		if (rpos == rend) {
			ssize_t r = read(fd, rbuf, sizeof rbuf);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				return 0;
			}
			if (r == 0)
				return 0;
			rpos = 0;
			rend = (size_t)r;
		}
		size_t k = rend - rpos;
		if (k > n)
			k = n;
		memcpy(p, rbuf + rpos, k);
		rpos += k;
		p += k;
		n -= k;
	}
	return 1;
}

/* read_frame reads one frame header and its data into chunk; returns the
 * type, or -1 on end of stream, error or a bad length. */
static int read_frame(int fd, uint32_t *len)
{
	unsigned char h[HDR];
	if (!read_full(fd, h, HDR))
		return -1;
	*len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
	if (*len > MAX_CHUNK)
		return -1;
	if (!read_full(fd, chunk, *len))
		return -1;
	return h[0];
}

/* connect_retry connects fd to sa; a full listen queue (EAGAIN: hundreds
 * of requests at once) is waited out for up to CONNECT_WAIT_MS instead of
 * failing the request. */
static int connect_retry(int fd, struct sockaddr_un *sa)
{
	int waited = 0, step = 5;
	for (;;) {
		if (connect(fd, (struct sockaddr *)sa, sizeof *sa) == 0)
			return 1;
		if ((errno != EAGAIN && errno != EINTR) || waited >= CONNECT_WAIT_MS)
			return 0;
		if (errno == EAGAIN) {
			struct timespec ts = {0, (long)step * 1000000L};
			nanosleep(&ts, NULL);
			waited += step;
			step = step < 100 ? step * 2 : 100;
		}
	}
}

static void fail(const char *msg)
{
	ssize_t r = write(2, msg, strlen(msg));
	(void)r;
	_exit(EXIT_FAILURE_CODE);
}

int main(int argc, char **argv, char **envp)
{
	int64_t begin = now_us();
	const char *sock = getenv(ENV_SESSION);
	const char *trace = getenv(ENV_TRACE);
	struct sockaddr_un sa;
	int fd, i, type;
	uint32_t len;

	if (argc > 1 && strcmp(argv[1], SESSION_VERB) == 0)
		return holder_main(argc - 2, argv + 2, go_client());
	if (argc > 1 && strcmp(argv[1], SIGNAL_VERB) == 0)
		return signal_main(argc - 2, argv + 2);
	saved_argv = argv;
	if (argc < 1)
		fallback(-1);
	if (sock == NULL || sock[0] == '\0')
		sock = getenv(ENV_BROKER);
	if (sock == NULL || sock[0] == '\0')
		sock = DEFAULT_BROKER;
	if (strlen(sock) >= sizeof sa.sun_path)
		fallback(-1);

	/* The request. */
	memcpy(req, "LZB1", 4);
	reqlen = 8;
	if (getcwd(cwd, sizeof cwd) == NULL)
		strcpy(cwd, "/"); /* what the Go client reports when getcwd fails */
	if (!add('c', cwd))
		fallback(-1);
	for (i = 0; i < argc; i++)
		if (argv[i] == NULL || !add('a', argv[i]))
			fallback(-1);
	for (i = 0; envp != NULL && envp[i] != NULL; i++)
		if (strncmp(envp[i], "LAZARET_", 8) == 0 && !add('e', envp[i]))
			fallback(-1);
	{
		uint32_t n = (uint32_t)(reqlen - 8);
		req[4] = (unsigned char)(n >> 24);
		req[5] = (unsigned char)(n >> 16);
		req[6] = (unsigned char)(n >> 8);
		req[7] = (unsigned char)n;
	}

	/* Hand it to the broker. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fallback(-1);
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	if (!connect_retry(fd, &sa))
		fallback(fd);
	if (!write_all(fd, req, reqlen, 1))
		fallback(fd);

	/* The acknowledgement: until it arrives the broker has not contacted
	 * the coordinator, so falling back cannot make the request twice. */
	{
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r;
		do
			r = poll(&p, 1, ACK_TIMEOUT_MS);
		while (r < 0 && errno == EINTR);
		if (r == 0)
			fail("lazaret-escalate: the escalation broker does not answer\n");
		if (r < 0)
			fallback(fd);
	}
	type = read_frame(fd, &len);
	if (type != 'k' || len != 0)
		fallback(fd);

	for (;;) {
		type = read_frame(fd, &len);
		switch (type) {
		case 'o':
		case 'e':
			(void)write_all(type == 'o' ? 1 : 2, chunk, len, 0);
			break;
		case 'x':
			if (len != 4)
				fail("lazaret-escalate: malformed answer from the escalation broker\n");
			{
				int32_t code = (int32_t)((uint32_t)chunk[0] << 24 | (uint32_t)chunk[1] << 16 |
							 (uint32_t)chunk[2] << 8 | chunk[3]);
				close(fd);
				if (trace != NULL && strcmp(trace, "1") == 0) {
					char line[96];
					int n = snprintf(line, sizeof line, "trace fe-begin %lld\ntrace fe-end %lld\n",
							 (long long)begin, (long long)now_us());
					if (n > 0 && (size_t)n < sizeof line)
						(void)write_all(2, (const unsigned char *)line, (size_t)n, 0);
				}
				_exit(code & 0xff);
			}
		case -1:
			fail("lazaret-escalate: the escalation broker went away before the answer\n");
			break;
		default:
			fail("lazaret-escalate: malformed answer from the escalation broker\n");
		}
	}
}
