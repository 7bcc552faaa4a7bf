#ifndef LBS_CMALLOC_H
#define LBS_CMALLOC_H

/// The malloc arena limit this process runs with: 1 unless MALLOC_ARENA_MAX or GLIBC_TUNABLES chose otherwise,
/// -1 when that was left to glibc. Set before main (see malloc.c).
int lbs_malloc_arena_max(void);

/// Gives the heap's free pages back to the kernel (glibc's malloc_trim(0)): after a burst, freed memory below
/// live allocations stays resident otherwise. Returns 1 when something was released.
int lbs_malloc_trim(void);

#endif
