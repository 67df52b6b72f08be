/* The launcher's session mode (safex-launch --session): see session.c. */
#pragma once

#include <stddef.h>

/* Shared with safex-launch.c. */
int write_all(int fd, const char* p, size_t n);
int read_all(int fd, char* p, size_t n);
void say(const char* a, const char* b, const char* c);

/* Serves the host's commands on `command_fd`, answering on `reply_fd`, until EOF on command_fd
 * (or a protocol error). Returns the launcher's exit status. */
int serve_session(int reply_fd, int command_fd);
