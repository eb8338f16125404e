/* pause — the sandbox ("pause") container of the cluster test tier's pods.
 * No registry is reachable on the test machines, so the image that holds a
 * pod's namespaces is built locally from this file (scripts/kube-build).
 * It sleeps until SIGINT/SIGTERM and reaps any child re-parented to it. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	struct sigaction sa = {0};
	sa.sa_handler = stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = reap;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;)
		pause();
	return 0;
}
