// Debian's libsqlite3 (libsqlite3-dev): the gateway's cache.
#include <sqlite3.h>
