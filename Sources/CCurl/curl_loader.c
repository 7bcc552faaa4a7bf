#include "CCurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

struct lbs_curl_api lbs_curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static CURLcode load_result = CURLE_FAILED_INIT;
static char load_error[512];

/* Every function in lbs_curl_api, by name, with where its pointer goes. */
#define LBS_CURL_SYMBOLS(X)                          \
    X(global_init, "curl_global_init")               \
    X(easy_init, "curl_easy_init")                   \
    X(easy_cleanup, "curl_easy_cleanup")             \
    X(easy_setopt, "curl_easy_setopt")               \
    X(easy_getinfo, "curl_easy_getinfo")             \
    X(easy_strerror, "curl_easy_strerror")           \
    X(slist_append, "curl_slist_append")             \
    X(slist_free_all, "curl_slist_free_all")         \
    X(multi_init, "curl_multi_init")                 \
    X(multi_cleanup, "curl_multi_cleanup")           \
    X(multi_setopt, "curl_multi_setopt")             \
    X(multi_add_handle, "curl_multi_add_handle")     \
    X(multi_remove_handle, "curl_multi_remove_handle") \
    X(multi_perform, "curl_multi_perform")           \
    X(multi_info_read, "curl_multi_info_read")       \
    X(multi_poll, "curl_multi_poll")                 \
    X(multi_wakeup, "curl_multi_wakeup")             \
    X(multi_strerror, "curl_multi_strerror")

/* Debian's libcurl4 does TLS with OpenSSL, but pulls GnuTLS in through librtmp and libldap, whose protocols the
   gateway never enables (CURLOPT_PROTOCOLS_STR is "http,https"). Loaded, GnuTLS initialises itself in its library
   constructor (its crypto backend, CPU detection, PKCS#11 set-up): memory for nothing here. Its constructor asks
   this weak hook first (GNUTLS_SKIP_GLOBAL_INIT in gnutls.h); the executable exports ours (Package.swift), so the
   set-up is skipped without touching the environment. */
__attribute__((visibility("default"), used)) int _gnutls_global_init_skip(void) { return 1; }

static void load(void) {
    /* The library's soname (libcurl4's, as install.sh installs it), bound lazily as the libraries linked at program
       start are; it stays loaded for the process. */
    void *library = dlopen("libcurl.so.4", RTLD_LAZY | RTLD_LOCAL);
    if (library == NULL) {
        const char *reason = dlerror();
        snprintf(load_error, sizeof load_error, "libcurl could not be loaded (install libcurl4): %s",
                 reason ? reason : "unknown error");
        return;
    }
    struct lbs_curl_api api;
#define LBS_CURL_RESOLVE(field, name)                                                                  \
    *(void **)(&api.field) = dlsym(library, name);                                                     \
    if (api.field == NULL) {                                                                           \
        snprintf(load_error, sizeof load_error, "libcurl.so.4 lacks %s (libcurl 7.68 or newer is needed)", name); \
        return;                                                                                        \
    }
    LBS_CURL_SYMBOLS(LBS_CURL_RESOLVE)
#undef LBS_CURL_RESOLVE
    lbs_curl = api;
    load_result = lbs_curl.global_init(CURL_GLOBAL_DEFAULT);
    if (load_result != CURLE_OK) {
        snprintf(load_error, sizeof load_error, "curl_global_init failed (%d)", (int)load_result);
    }
}

CURLcode lbs_curl_global_init(void) {
    pthread_once(&load_once, load);
    return load_result;
}

const char *lbs_curl_load_error(void) {
    /* Written only inside `load`, which lbs_curl_global_init has finished before its caller asks. */
    return load_error[0] ? load_error : NULL;
}
