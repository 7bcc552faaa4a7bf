#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>
#include "CProcessSpawn.h"

int lbs_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int lbs_spawn_file_actions_addclosefrom(posix_spawn_file_actions_t *actions, int low) {
    return posix_spawn_file_actions_addclosefrom_np(actions, low);
}
