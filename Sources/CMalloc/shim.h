// glibc's mallopt: malloc.h is not part of Swift's Glibc module.
#include <malloc.h>
