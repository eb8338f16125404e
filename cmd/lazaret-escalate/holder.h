/* The session holder (holder.c), entered from main.c. */
#ifndef LAZARET_HOLDER_H
#define LAZARET_HOLDER_H

/* The exit code of a failure of lazaret-escalate itself. */
#define EXIT_FAILURE_CODE 125
/* The hidden first argument that selects the session holder. */
#define SESSION_VERB "__session"

/* holder_main runs the holder for argv (what follows SESSION_VERB); go is
 * the Go client, started as the session's signer. */
int holder_main(int argc, char **argv, const char *go);

/* The hidden first argument that signals an isolated session. */
#define SIGNAL_VERB "__signal"
int signal_main(int argc, char **argv);

#endif
