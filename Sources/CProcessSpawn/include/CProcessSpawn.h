#ifndef C_PROCESS_SPAWN_H
#define C_PROCESS_SPAWN_H

#include <spawn.h>

/// glibc's GNU extensions for starting helper programs, which Swift cannot see without _GNU_SOURCE.
/// A pipe whose two ends close on exec.
int lbs_pipe_cloexec(int fds[2]);
/// Closes every descriptor from `low` up in the child (glibc 2.34+).
int lbs_spawn_file_actions_addclosefrom(posix_spawn_file_actions_t *actions, int low);

#endif
