/*
 * The session holder: `lazaret-escalate __session [--pidfile PATH] --
 * CMD...`, the first process of every `lazaret shell`/`exec` in the
 * sandbox. With --pidfile it writes CMD's pid there (for the CLI's signal
 * delivery without a terminal; before, a /bin/sh in front of CMD did,
 * one more dynamic executable's start on every exec).
 *
 * It replaces a Go holder whose start cost every exec 25-50 ms under
 * gVisor (docs/PERFORMANCE.md); this one costs a fork. It keeps the
 * session's delegation out of every other session's reach:
 *   - it makes itself non-dumpable before anything else, so no other
 *     process (root in the sandbox without CAP_SYS_PTRACE included) reads
 *     its /proc/PID/environ, fd/, maps or mem, or attaches to it;
 *   - the delegation (the NAME=VALUE lines of LAZARET_SESSION_ID,
 *     LAZARET_DELEGATION and LAZARET_DELEGATED_KEY) arrives on descriptor
 *     3 (`podman exec --preserve-fds 1`), read only after that, never
 *     through the environment. Descriptor 3 must be a socket: before the
 *     prctl another process could reopen a pipe through /proc/PID/fd/3,
 *     never a socket (ENXIO, measured under runsc);
 *   - it runs CMD as its child, without descriptor 3 and with
 *     LAZARET_SESSION_SOCKET naming a socket in a new 0700 directory;
 *   - it does not sign: on the first connection to that socket it starts
 *     the Go signer (`lazaret-escalate-go __signer PID`, which makes itself
 *     non-dumpable first thing), hands it the listening socket as
 *     descriptor 3 and the delegation on a socket pair as descriptor 4
 *     (a socket cannot be reopened through /proc/PID/fd). The signer
 *     serves requests like the broker, only for descendants of this
 *     process (SO_PEERCRED), and dies with it (PR_SET_PDEATHSIG). A session
 *     that never escalates never starts it.
 * With --isolate (every local session) the session runs in PID and mount
 * namespaces of its own (see isolate below): no other session's process
 * can name, trace, signal or read any of its processes, or reach its
 * socket, which is then in a private read-only directory. --no-key runs a
 * command of lazaret's own isolated the same way, without a delegation.
 * It reaps orphans of the session (child subreaper), forwards the signals
 * that reach it to CMD (not a terminal's SIGINT/SIGQUIT/SIGTSTP, which the
 * foreground process group has already), and exits with CMD's exit code
 * (128+N for a signal N; 127 not found, 126 not runnable).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sched.h>

#include "holder.h"

#define KEY_FD 3
#define MAX_KEY 16384
#define SIGNER_VERB "__signer"
/* A signer that keeps dying (a broken installation) is not restarted
 * forever: after that many starts the socket closes, and front ends
 * report that host escalation is unavailable. */
#define MAX_SIGNER_STARTS 3
#define EXIT_USAGE 2
/* --stdin (the Kubernetes backend, whose exec passes no descriptor): the
 * marker the holder writes once it is non-dumpable (and, on a terminal,
 * has turned echo off), and the frame it then reads from stdin: 4 hex
 * digits of length, then that many bytes of the lines descriptor 3 would
 * carry (internal/session: HolderReady, StdinFrame). An APC string: a
 * terminal shows nothing of it should it ever reach one. */
#define READY_MARKER "\033_lazaret-holder-ready\033\\"
#define FRAME_HDR 4
/* --isolate: the session's own directory, a private tmpfs mounted over
 * the sandbox's read-only SESSION_DIR in the session's mount namespace
 * (internal/escprompt: SandboxSessionDir). */
#define SESSION_DIR "/run/lazaret/session"
/* The shared broker's socket directory (internal/coordinator/escalation:
 * SandboxBrokerDir), read-only in every session's namespace. */
#define BROKER_DIR "/run/lazaret/escalate-broker"
/* Where isolated sessions' holders record the pid the CLI signals: a
 * tmpfs only the sandbox's first namespace sees (each session's X mounts
 * an empty read-only one over it), so no session can name another
 * session's process there (internal/escprompt: SandboxPidDir). */
#define PID_DIR "/run/lazaret/pids"

static char key[MAX_KEY];
static size_t keylen;
static volatile pid_t child;
static int tty;
static int wake[2] = {-1, -1};
static const int forwarded[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGTSTP, SIGUSR1, SIGUSR2};

/* report writes "PREFIXa: b\n" (": b" only when b is set) on stderr,
 * without stdio (it is called between fork and exec). */
static void report(const char *prefix, const char *a, const char *b)
{
	ssize_t r = write(2, prefix, strlen(prefix));
	r = write(2, a, strlen(a));
	if (b != NULL) {
		r = write(2, ": ", 2);
		r = write(2, b, strlen(b));
	}
	r = write(2, "\n", 1);
	(void)r;
}

static void say(const char *a, const char *b)
{
	report("lazaret-escalate: session: ", a, b);
}

/* command_failed reports that the session's command could not be run, as
 * a shell would and without this program's name: the user ran `lazaret
 * exec -- CMD` or `lazaret shell`, not the holder. */
static void command_failed(const char *cmd, int e)
{
	report("lazaret: ", cmd, e == ENOENT ? "command not found" : strerror(e));
}

static void on_signal(int sig)
{
	int saved = errno;
	if (sig == SIGCHLD) {
		ssize_t r = write(wake[1], "c", 1);
		(void)r;
	} else if (child > 0 && !(tty && (sig == SIGINT || sig == SIGQUIT || sig == SIGTSTP))) {
		kill(child, sig);
	}
	errno = saved;
}

/* read_key takes the delegation from descriptor 3, which must be a socket
 * (anything else was not put there by lazaret), and closes it. */
static int read_key(void)
{
	struct stat st;
	if (fstat(KEY_FD, &st) != 0)
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		close(KEY_FD);
		return 0;
	}
	for (;;) {
		ssize_t r = read(KEY_FD, key + keylen, sizeof key - keylen);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		keylen += (size_t)r;
		if (keylen == sizeof key)
			break;
	}
	close(KEY_FD);
	if (keylen == 0 || keylen == sizeof key) {
		memset(key, 0, sizeof key);
		keylen = 0;
		return 0;
	}
	return 1;
}

/* read_full reads exactly n bytes from fd. */
static int read_full(int fd, char *p, size_t n)
{
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 0;
		p += r;
		n -= (size_t)r;
	}
	return 1;
}

/* read_key_stdin takes the delegation from stdin (--stdin): the process is
 * already non-dumpable, so nothing can reopen its stdin through
 * /proc/PID/fd once the frame is on its way; on a terminal, echo and the
 * line discipline are off while it arrives (the key is never echoed into
 * the session's output) and restored without flushing what the user typed
 * after it. Only then is the ready marker written: the CLI sends the frame
 * after it, never before. */
static int read_key_stdin(void)
{
	struct termios saved, raw;
	char hdr[FRAME_HDR + 1];
	unsigned long n;
	char *end;
	int term = isatty(0) && tcgetattr(0, &saved) == 0, ok;
	if (term) {
		raw = saved;
		raw.c_iflag &= ~(tcflag_t)(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
		raw.c_lflag &= ~(tcflag_t)(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
		raw.c_cc[VMIN] = 1;
		raw.c_cc[VTIME] = 0;
		if (tcsetattr(0, TCSANOW, &raw) != 0)
			return 0;
	}
	ok = write(1, READY_MARKER, sizeof READY_MARKER - 1) == (ssize_t)(sizeof READY_MARKER - 1) &&
	     read_full(0, hdr, FRAME_HDR);
	if (ok) {
		hdr[FRAME_HDR] = 0;
		n = strtoul(hdr, &end, 16);
		ok = *end == 0 && n > 0 && n < sizeof key && read_full(0, key, n);
		keylen = ok ? n : 0;
	}
	if (term)
		tcsetattr(0, TCSANOW, &saved);
	if (!ok) {
		memset(key, 0, sizeof key);
		keylen = 0;
	}
	return ok;
}

/* listen_session makes the session socket in a new private directory. */
static int listen_session(char *dir, size_t dirsz, char *path, size_t pathsz, int isolated)
{
	const char *tmp = isolated ? SESSION_DIR : getenv("TMPDIR");
	struct sockaddr_un sa;
	int fd;
	if (tmp == NULL || tmp[0] != '/')
		tmp = "/tmp";
	/* Isolated: SESSION_DIR is the session's own (and its removal at the
	 * end fails harmlessly: a read-only mount point). */
	if (isolated ? (size_t)snprintf(dir, dirsz, "%s", tmp) >= dirsz
		     : (size_t)snprintf(dir, dirsz, "%s/lazaret-session-XXXXXX", tmp) >= dirsz || mkdtemp(dir) == NULL)
		return -1;
	if ((size_t)snprintf(path, pathsz, "%s/sock", dir) >= pathsz || strlen(path) >= sizeof sa.sun_path) {
		rmdir(dir);
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rmdir(dir);
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 1024) != 0) {
		close(fd);
		unlink(path);
		rmdir(dir);
		return -1;
	}
	return fd;
}

/* The session's isolation (--isolate). Every session of a sandbox runs as
 * the sandbox's root, so without it one session's processes could trace,
 * signal and read (/proc/PID/environ, maps) another's: root in gVisor may
 * even lower yama's ptrace_scope. The holder therefore puts the session in
 * a PID namespace and a mount namespace of its own: the holder's child X
 * is PID 1 there, mounts a /proc that shows only the session's processes
 * and a private tmpfs for the session's socket, drops the two capabilities
 * lazaret gave the holder for that (SYS_ADMIN, SETPCAP) and every other
 * one the container does not have, then runs the session as the holder
 * always did. Another session's processes have no PID for any of this
 * session's (kill, ptrace, /proc and SO_PEERCRED all see nothing), and
 * cannot reach its socket. The holder itself stays outside as X's parent:
 * it forwards signals to X and exits with X's status. */

/* container_caps reads the container's capability bounding set from its
 * first process (the sandbox's init), before this process leaves its PID
 * namespace: what a session may keep. */
static int container_caps(unsigned long long *mask)
{
	char buf[4096], *p, *end;
	ssize_t n;
	int fd = open("/proc/1/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strstr(buf, "\nCapBnd:");
	if (p == NULL)
		return 0;
	errno = 0;
	*mask = strtoull(p + 8, &end, 16);
	return errno == 0 && end != p + 8 && (*end == '\n' || *end == 0);
}

/* keep_caps drops every capability outside keep from the bounding set
 * (SETPCAP last: the drops need it) and from the permitted, effective and
 * inheritable sets, and checks that SYS_ADMIN is gone when not kept. */
static int keep_caps(unsigned long long keep)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	int cap;
	for (cap = 0; cap < 64; cap++)
		if (cap != CAP_SETPCAP && !(keep >> cap & 1) && prctl(PR_CAPBSET_READ, cap) == 1 &&
		    prctl(PR_CAPBSET_DROP, cap) != 0)
			return 0;
	if (!(keep >> CAP_SETPCAP & 1) && prctl(PR_CAPBSET_READ, CAP_SETPCAP) == 1 &&
	    prctl(PR_CAPBSET_DROP, CAP_SETPCAP) != 0)
		return 0;
	if (syscall(SYS_capget, &h, d) != 0)
		return 0;
	for (cap = 0; cap < 2; cap++) {
		__u32 k = (__u32)(keep >> (32 * cap));
		d[cap].effective &= k;
		d[cap].permitted &= k;
		d[cap].inheritable &= k;
	}
	if (syscall(SYS_capset, &h, d) != 0)
		return 0;
	return (keep >> CAP_SYS_ADMIN & 1) || prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN) == 0;
}

/* take_terminal makes X the leader of a new session whose controlling
 * terminal is the session's (taken from the holder's session, which needs
 * SYS_ADMIN), in the foreground: a shell checks that its terminal's
 * foreground process group is its own, and the holder's group has no ID in
 * this PID namespace (the shell would stop itself, waiting forever). */
static int take_terminal(void)
{
	struct sigaction ign, old;
	int ok;
	if (setsid() < 0 || ioctl(0, TIOCSCTTY, 1) != 0)
		return 0;
	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	sigaction(SIGTTOU, &ign, &old);
	ok = tcsetpgrp(0, getpgrp()) == 0;
	sigaction(SIGTTOU, &old, NULL);
	return ok;
}

/* enter_session_ns makes X's namespace the session's: mounts private to
 * it, its own /proc, its own socket directory, the pid directory hidden,
 * the terminal (seal_session follows once the socket is made). */
static int enter_session_ns(void)
{
	if (unshare(CLONE_NEWNS) != 0)
		return 0;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return 0;
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return 0;
	if (mount("tmpfs", SESSION_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=700,size=64k") != 0)
		return 0;
	if (mount("tmpfs", PID_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "mode=500,size=4k") != 0)
		return 0;
	if (tty && !take_terminal())
		return 0;
	return 1;
}

/* seal_session, in X once the session's socket is there, makes its
 * directory read-only (nothing in the session can rename or replace the
 * socket) and keeps only the container's capabilities. */
static int seal_session(unsigned long long keep)
{
	struct stat st;
	if (mount(NULL, SESSION_DIR, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return 0;
	/* The shared broker's directory is the one writable tmpfs under
	 * /run/lazaret (the broker binds its socket there after the start):
	 * seen read-only from every session (a bind remount changes this
	 * namespace's view only), no session's root can rename or replace the
	 * socket another session's front end may reach. */
	if (lstat(BROKER_DIR, &st) == 0 &&
	    mount(NULL, BROKER_DIR, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return 0;
	return keep_caps(keep);
}

/* isolate forks X into new PID and mount namespaces: 0 in X, X's pid in
 * the holder, -1 (errno set) on failure; keep is the container's
 * capability set. X reports its own failure to set up and exits
 * EXIT_FAILURE_CODE. */
static pid_t isolate(unsigned long long *keep)
{
	pid_t pid;
	if (!container_caps(keep)) {
		errno = errno ? errno : EINVAL;
		return -1;
	}
	/* The PID namespace is for the children only; the mount namespace is
	 * X's own (unshare would move the holder into it too, where the pid
	 * directory is hidden). */
	if (unshare(CLONE_NEWPID) != 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0 && !enter_session_ns()) {
		say("cannot isolate the session's processes", strerror(errno));
		_exit(EXIT_FAILURE_CODE);
	}
	return pid;
}

static void block_signals(sigset_t *old)
{
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, old);
}

/* start_command forks CMD; in the child the key is wiped and the
 * handlers' dispositions go back to their defaults with the exec. */
/* write_pidfile records pid in path; a symlink there is not followed. */
static void write_pidfile(const char *path, pid_t pid)
{
	char line[24];
	int n = snprintf(line, sizeof line, "%d\n", (int)pid);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		say("cannot record the command's pid", strerror(errno));
		return;
	}
	if (write(fd, line, (size_t)n) != n)
		say("cannot record the command's pid", strerror(errno));
	close(fd);
}

static pid_t start_command(char **argv, const char *pidfile)
{
	sigset_t old;
	pid_t pid;
	block_signals(&old);
	pid = fork();
	if (pid == 0) {
		memset(key, 0, sizeof key);
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[0], argv);
		{
			int e = errno;
			command_failed(argv[0], e);
			_exit(e == ENOENT ? 127 : 126);
		}
	}
	if (pid > 0) {
		child = pid;
		if (pidfile != NULL)
			write_pidfile(pidfile, pid);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return pid;
}

/* move_fd puts fd at want in a child about to exec (without close-on-exec). */
static int move_fd(int fd, int want)
{
	int tmp = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	return tmp >= 0 && dup2(tmp, want) == want;
}

/* start_signer starts the Go signer with the listening socket ln as
 * descriptor 3 and sends it the delegation on descriptor 4. */
static pid_t start_signer(int ln, const char *go)
{
	int sv[2];
	sigset_t old;
	pid_t pid, self = getpid();
	char ppid[24];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	snprintf(ppid, sizeof ppid, "%d", (int)self);
	block_signals(&old);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		memset(key, 0, sizeof key);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != self || null < 0 || dup2(null, 0) != 0 || !move_fd(ln, 3) || !move_fd(sv[1], 4))
			_exit(EXIT_FAILURE_CODE);
		if (null > 4)
			close(null);
		sigprocmask(SIG_SETMASK, &old, NULL);
		execl(go, "lazaret-escalate-go", SIGNER_VERB, ppid, (char *)NULL);
		say("cannot run the signer", go);
		_exit(EXIT_FAILURE_CODE);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(sv[1]);
	if (pid > 0) {
		const char *p = key;
		size_t n = keylen;
		while (n > 0) {
			ssize_t w = send(sv[0], p, n, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				break;
			p += w;
			n -= (size_t)w;
		}
	}
	close(sv[0]);
	return pid;
}

static void install_handlers(void)
{
	struct sigaction sa;
	size_t i;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigfillset(&sa.sa_mask);
	for (i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		sigaction(forwarded[i], &sa, NULL);
	sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
}

/* exit_code is the shell's exit code for a wait status. */
static int exit_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

/* signer_ended says on the session's terminal that its signer ended
 * without being asked to: killed, it cannot sign this session's requests
 * until the holder starts it again on the next one. */
static void signer_ended(int st, int starts)
{
	char why[64];
	if (WIFSIGNALED(st))
		snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(st));
	else
		snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(st));
	say(starts < MAX_SIGNER_STARTS ? "host escalation's signer ended; the next request restarts it"
				       : "host escalation's signer ended; it is not restarted again",
	    why);
}

/* serve waits for CMD, reaping every child, and starts the signer when a
 * request arrives on ln (ln < 0: no escalation). */
static int serve(int ln, const char *go)
{
	pid_t signer = 0;
	int starts = 0;
	for (;;) {
		struct pollfd p[2] = {{.fd = wake[0], .events = POLLIN}, {.fd = ln, .events = POLLIN}};
		nfds_t n = (ln >= 0 && signer == 0) ? 2 : 1;
		int st;
		pid_t w;
		if (poll(p, n, -1) < 0 && errno != EINTR)
			return EXIT_FAILURE_CODE;
		if (p[0].revents & POLLIN) {
			char buf[64];
			ssize_t r = read(wake[0], buf, sizeof buf);
			(void)r;
		}
		while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
			if (w == child)
				return exit_code(st);
			if (w == signer) {
				signer = 0;
				signer_ended(st, starts);
			}
		}
		if (n == 2 && (p[1].revents & (POLLIN | POLLERR | POLLHUP))) {
			if (starts == MAX_SIGNER_STARTS) {
				say("host escalation is unavailable in this session", "its signer keeps failing");
				close(ln);
				ln = -1;
				continue;
			}
			starts++;
			signer = start_signer(ln, go);
			if (signer < 0)
				signer = 0;
		}
	}
}

/* outside is the holder's part outside an isolated session: it records
 * X's pid (the CLI's signals go to X, which forwards them to CMD),
 * forwards the signals it gets to X and exits with X's status. */
static int outside(pid_t x, const char *pidfile)
{
	int code;
	if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		kill(x, SIGKILL);
		say("cannot run", strerror(errno));
		return EXIT_FAILURE_CODE;
	}
	child = x;
	install_handlers();
	/* X may have ended before the handler was there: look once. */
	if (write(wake[1], "c", 1) != 1)
		return EXIT_FAILURE_CODE;
	if (pidfile != NULL)
		write_pidfile(pidfile, x);
	/* The holder needs no capability from here on. */
	if (!keep_caps(0)) {
		kill(x, SIGKILL);
		say("cannot drop the holder's capabilities", strerror(errno));
	}
	code = serve(-1, NULL);
	/* A pid recorded for a session that ended could name a process that
	 * reuses it. */
	if (pidfile != NULL)
		unlink(pidfile);
	return code;
}

/* signal_main is `lazaret-escalate __signal NAME SIGNAL`: the CLI's way to
 * signal a session without a terminal. It runs in the sandbox's first
 * namespace (a podman exec of this read-only binary, not the image's
 * kill, which the agent may have replaced) and signals the pid that the
 * session's holder recorded as PID_DIR/NAME. */
int signal_main(int argc, char **argv)
{
	char path[256], line[32];
	long pid, sig;
	char *end;
	ssize_t n;
	int fd;
	if (argc != 2 || strchr(argv[0], '/') != NULL || argv[0][0] == '.' ||
	    (size_t)snprintf(path, sizeof path, "%s/%s", PID_DIR, argv[0]) >= sizeof path) {
		say("usage: __signal NAME SIGNAL", NULL);
		return EXIT_USAGE;
	}
	sig = strtol(argv[1], &end, 10);
	if (*end != 0 || sig <= 0 || sig >= 65) {
		say("not a signal number", argv[1]);
		return EXIT_USAGE;
	}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		say("no such session", argv[0]);
		return EXIT_FAILURE_CODE;
	}
	n = read(fd, line, sizeof line - 1);
	close(fd);
	line[n > 0 ? n : 0] = 0;
	pid = strtol(line, &end, 10);
	if (pid <= 1 || (*end != '\n' && *end != 0) || kill((pid_t)pid, (int)sig) != 0) {
		say("cannot signal the session", argv[0]);
		return EXIT_FAILURE_CODE;
	}
	return 0;
}

/* path_append adds dir at the end of PATH unless it is there (the
 * Kubernetes backend: the client's directory, as the local backend's
 * container environment has it). */
static int path_append(const char *dir)
{
	const char *path = getenv("PATH");
	size_t n;
	char *p, *q;
	if (path == NULL || *path == 0)
		return setenv("PATH", dir, 1) == 0;
	n = strlen(dir);
	for (q = (char *)path; (p = strstr(q, dir)) != NULL; q = p + 1)
		if ((p == path || p[-1] == ':') && (p[n] == 0 || p[n] == ':'))
			return 1;
	p = malloc(strlen(path) + n + 2);
	if (p == NULL)
		return 0;
	sprintf(p, "%s:%s", path, dir);
	n = setenv("PATH", p, 1) == 0;
	free(p);
	return (int)n;
}

int holder_main(int argc, char **argv, const char *go)
{
	char dir[256], path[300];
	int ln = -1, code;
	const char *pidfile = NULL;
	int from_stdin = 0, got = 0, isolated = 0, no_key = 0;
	unsigned long long keep = 0;
	/* First thing: nothing of this process is readable from outside
	 * from here on. */
	prctl(PR_SET_DUMPABLE, 0);
	for (;;) {
		if (argc > 1 && strcmp(argv[0], "--pidfile") == 0) {
			pidfile = argv[1];
		} else if (argc > 1 && strcmp(argv[0], "--env") == 0 && strchr(argv[1], '=') != NULL) {
			/* Paths of the session (the Kubernetes backend's socket
			 * and TLS directory), never a secret. */
			if (putenv(argv[1]) != 0) {
				say("cannot set", argv[1]);
				return EXIT_USAGE;
			}
		} else if (argc > 1 && strcmp(argv[0], "--path-append") == 0) {
			if (!path_append(argv[1])) {
				say("cannot extend PATH with", argv[1]);
				return EXIT_USAGE;
			}
		} else if (argc > 0 && strcmp(argv[0], "--stdin") == 0) {
			from_stdin = 1;
			argc--;
			argv++;
			continue;
		} else if (argc > 0 && strcmp(argv[0], "--isolate") == 0) {
			isolated = 1;
			argc--;
			argv++;
			continue;
		} else if (argc > 0 && strcmp(argv[0], "--no-key") == 0) {
			/* A command of lazaret's own (the ref sync's git), run
			 * isolated but with no escalation of its own. */
			no_key = 1;
			argc--;
			argv++;
			continue;
		} else {
			break;
		}
		argc -= 2;
		argv += 2;
	}
	if (argc > 0 && strcmp(argv[0], "--") == 0) {
		argc--;
		argv++;
	}
	if (argc == 0) {
		say("no command", NULL);
		return EXIT_USAGE;
	}
	/* --env may name the Go client (the Kubernetes backend's path). */
	if (getenv("LAZARET_ESCALATE_FALLBACK") != NULL)
		go = getenv("LAZARET_ESCALATE_FALLBACK");
	tty = isatty(0);
	unsetenv("LAZARET_DELEGATED_KEY");
	unsetenv("LAZARET_DELEGATION");
	if (!no_key) {
		got = from_stdin ? read_key_stdin() : read_key();
		if (!got)
			say("host escalation is unavailable in this session", from_stdin ? "no delegation on stdin" : "no delegation on descriptor 3");
	}
	if (isolated) {
		pid_t x = isolate(&keep);
		if (x < 0) {
			memset(key, 0, sizeof key);
			say("cannot isolate the session's processes", strerror(errno));
			return EXIT_FAILURE_CODE;
		}
		if (x > 0) {
			memset(key, 0, sizeof key);
			return outside(x, pidfile);
		}
		pidfile = NULL; /* the holder outside records X's pid */
	}
	if (got) {
		prctl(PR_SET_CHILD_SUBREAPER, 1);
		ln = listen_session(dir, sizeof dir, path, sizeof path, isolated);
		if (ln < 0 || setenv("LAZARET_SESSION_SOCKET", path, 1) != 0) {
			say("host escalation is unavailable in this session", strerror(errno));
			if (ln >= 0) {
				close(ln);
				unlink(path);
				rmdir(dir);
				ln = -1;
			}
		}
	}
	if (isolated && !seal_session(keep)) {
		say("cannot isolate the session's processes", strerror(errno));
		return EXIT_FAILURE_CODE;
	}
	if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		say("cannot run", strerror(errno));
		return EXIT_FAILURE_CODE;
	}
	install_handlers();
	if (start_command(argv, pidfile) < 0) {
		say("cannot run", strerror(errno));
		code = EXIT_FAILURE_CODE;
	} else {
		code = serve(ln, go);
	}
	memset(key, 0, sizeof key);
	if (ln >= 0) {
		close(ln);
		unlink(path);
		rmdir(dir);
	}
	return code;
}
