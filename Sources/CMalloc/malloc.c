#include "CMalloc.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static int arena_max = -1;

/// One malloc arena. glibc gives each thread that allocates while another holds the lock an arena of its own
/// (up to 8 per core), and each keeps its freed pages; the gateway's few threads do not contend enough to need
/// them. This runs before main: the Swift runtime and the concurrency pool's first threads allocate before any
/// Swift code could call mallopt, and an arena made then stays (it was 6.5 MB of the 1,000-device run).
__attribute__((constructor)) static void lbs_one_malloc_arena(void) {
    const char *tunables = getenv("GLIBC_TUNABLES");
    if (getenv("MALLOC_ARENA_MAX") != NULL || (tunables != NULL && strstr(tunables, "arena_max") != NULL)) {
        return;
    }
    if (mallopt(M_ARENA_MAX, 1) == 1) {
        arena_max = 1;
    }
}

int lbs_malloc_arena_max(void) { return arena_max; }

int lbs_malloc_trim(void) { return malloc_trim(0); }
