#ifndef LBS_CCURL_SHIM_H
#define LBS_CCURL_SHIM_H
#include <curl/curl.h>
#endif
